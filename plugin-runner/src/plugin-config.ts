import { join } from "node:path";
import type { Logger, Owner, Permissions } from "@stavrobot/common";
import {
  DomainError,
  UnsafePathError,
  readFileNoFollow,
  unknownKeys,
  writeFileAtomic,
} from "@stavrobot/common";
import type { Plugin } from "./formats/format.js";

/**
 * `config.json` at a plugin's root: plain key → value JSON that tools read as `../config.json`,
 * plus the `permissions` copy the runner keeps there for compatibility. Values may be secrets:
 * no route of the runner returns them.
 */

const CONFIG_MAX_BYTES = 1024 * 1024;
const PERMISSIONS_KEY = "permissions";

export type ConfigValues = Record<string, unknown>;

/** The whole file; a missing, malformed or symlinked file counts as empty. */
async function readConfigFile(pluginDir: string, logger?: Logger): Promise<ConfigValues> {
  let raw: Buffer;
  try {
    raw = await readFileNoFollow(join(pluginDir, "config.json"), CONFIG_MAX_BYTES);
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
  logger?.warn("ignoring malformed config.json", { dir: pluginDir });
  return {};
}

/** The config values, without the runner's `permissions` copy. */
export async function readConfigValues(pluginDir: string, logger?: Logger): Promise<ConfigValues> {
  const values = await readConfigFile(pluginDir, logger);
  delete values[PERMISSIONS_KEY];
  return values;
}

/** The `permissions` a config.json carries, if it is a valid list (used once, to adopt old installs). */
export async function readPermissionsCopy(pluginDir: string): Promise<Permissions | undefined> {
  const value = (await readConfigFile(pluginDir))[PERMISSIONS_KEY];
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) return undefined;
  return value as Permissions;
}

/** Writes the values and the permissions copy, handing the file to the plugin's user. */
export async function writeConfigValues(
  pluginDir: string,
  values: ConfigValues,
  permissions: Permissions,
  owner?: Owner,
): Promise<void> {
  const { [PERMISSIONS_KEY]: _ignored, ...rest } = values;
  const text = JSON.stringify({ ...rest, [PERMISSIONS_KEY]: permissions }, null, 2) + "\n";
  await writeFileAtomic(join(pluginDir, "config.json"), text, owner);
}

export function isConfigured(value: unknown): boolean {
  return value !== undefined && value !== null && value !== "";
}

/** `{key: {description, required, configured}}` — presence only, never values. */
export function configStatus(plugin: Plugin, values: ConfigValues) {
  if (!plugin.config) return undefined;
  return Object.fromEntries(
    Object.entries(plugin.config).map(([key, entry]) => [
      key,
      { description: entry.description, required: entry.required, configured: isConfigured(values[key]) },
    ]),
  );
}

export function missingRequired(
  plugin: Plugin,
  values: ConfigValues,
): { key: string; description: string }[] {
  return Object.entries(plugin.config ?? {})
    .filter(([key, entry]) => entry.required && !isConfigured(values[key]))
    .map(([key, entry]) => ({ key, description: entry.description }));
}

/** Manifest defaults for keys that have no value yet; returns the new values and the keys filled. */
export function withDefaults(
  plugin: Plugin,
  values: ConfigValues,
): { values: ConfigValues; applied: string[] } {
  const next = { ...values };
  const applied: string[] = [];
  for (const [key, entry] of Object.entries(plugin.config ?? {})) {
    if (entry.default !== undefined && !isConfigured(next[key])) {
      next[key] = entry.default;
      applied.push(key);
    }
  }
  return { values: next, applied };
}

/**
 * Merges `update` into the values. Only keys the manifest declares are accepted; `null` removes a
 * value. Returns the new values and the keys written.
 */
export function mergeConfig(
  plugin: Plugin,
  values: ConfigValues,
  update: ConfigValues,
): { values: ConfigValues; keys: string[] } {
  const keys = Object.keys(update);
  if (keys.length === 0) return { values, keys };
  if (!plugin.config || Object.keys(plugin.config).length === 0) {
    throw new DomainError("invalid", "Plugin does not accept configuration.");
  }
  const declared = plugin.config;
  const unknown = keys.filter((key) => !Object.hasOwn(declared, key));
  if (unknown.length > 0) throw new DomainError("invalid", unknownKeys(unknown, "Unknown config keys"));
  const next = { ...values };
  for (const key of keys) {
    if (update[key] === null) delete next[key];
    else next[key] = update[key];
  }
  return { values: next, keys };
}
