import { join } from "node:path";
import type { Logger } from "@stavrobot/common";
import { badRequest } from "@stavrobot/common";
import type { Bundle } from "./bundles.js";
import type { Owner } from "./fs-safe.js";
import { UnsafePathError, readFileNoFollow, writeFileAtomic } from "./fs-safe.js";

/**
 * `config.json` at a bundle root: plain key → value JSON that tools read as `../config.json`.
 * Values may be secrets: only `GET /bundles/:name/config` (admin UI) ever returns them.
 */

const CONFIG_MAX_BYTES = 1024 * 1024;

export type ConfigValues = Record<string, unknown>;

/** The current values; a missing, malformed or symlinked file counts as empty. */
export async function readConfigValues(bundleDir: string, logger?: Logger): Promise<ConfigValues> {
  let raw: Buffer;
  try {
    raw = await readFileNoFollow(join(bundleDir, "config.json"), CONFIG_MAX_BYTES);
  } catch (error) {
    if (error instanceof UnsafePathError)
      logger?.warn("ignoring unsafe config.json", { reason: error.message });
    return {};
  }
  try {
    const value: unknown = JSON.parse(raw.toString("utf8"));
    if (value && typeof value === "object" && !Array.isArray(value)) return value as ConfigValues;
  } catch {
    // Fall through.
  }
  logger?.warn("ignoring malformed config.json", { dir: bundleDir });
  return {};
}

export async function writeConfigValues(
  bundleDir: string,
  values: ConfigValues,
  owner?: Owner,
): Promise<void> {
  await writeFileAtomic(join(bundleDir, "config.json"), JSON.stringify(values, null, 2) + "\n", owner);
}

export function isConfigured(value: unknown): boolean {
  return value !== undefined && value !== null && value !== "";
}

/** `{key: {description, required, configured}}` — presence only, never values. */
export function configStatus(bundle: Bundle, values: ConfigValues) {
  if (!bundle.config) return undefined;
  return Object.fromEntries(
    Object.entries(bundle.config).map(([key, entry]) => [
      key,
      { description: entry.description, required: entry.required, configured: isConfigured(values[key]) },
    ]),
  );
}

export function missingRequired(
  bundle: Bundle,
  values: ConfigValues,
): { key: string; description: string }[] {
  return Object.entries(bundle.config ?? {})
    .filter(([key, entry]) => entry.required && !isConfigured(values[key]))
    .map(([key, entry]) => ({ key, description: entry.description }));
}

/** Writes manifest defaults for keys that have no value yet; returns the keys it filled. */
export async function applyDefaults(bundle: Bundle, owner?: Owner, logger?: Logger): Promise<string[]> {
  const values = await readConfigValues(bundle.dir, logger);
  const applied: string[] = [];
  for (const [key, entry] of Object.entries(bundle.config ?? {})) {
    if (entry.default !== undefined && !isConfigured(values[key])) {
      values[key] = entry.default;
      applied.push(key);
    }
  }
  if (applied.length > 0) await writeConfigValues(bundle.dir, values, owner);
  return applied;
}

/**
 * Merges `update` into config.json. Only keys the manifest declares are accepted; `null` removes
 * a value. Returns the keys written.
 */
export async function mergeConfig(
  bundle: Bundle,
  update: ConfigValues,
  owner?: Owner,
  logger?: Logger,
): Promise<string[]> {
  const keys = Object.keys(update);
  if (!bundle.config || Object.keys(bundle.config).length === 0) {
    throw badRequest("Plugin does not accept configuration.");
  }
  const declared = bundle.config;
  const unknown = keys.filter((key) => !Object.hasOwn(declared, key));
  if (unknown.length > 0) throw badRequest(`Unknown config keys: ${unknown.join(", ")}`);
  const values = await readConfigValues(bundle.dir, logger);
  for (const key of keys) {
    if (update[key] === null) delete values[key];
    else values[key] = update[key];
  }
  await writeConfigValues(bundle.dir, values, owner);
  return keys;
}
