import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { PLUGIN_NAME_PATTERN } from "@stavrobot/common";
import type { Logger, ToolParameter } from "@stavrobot/common";
import { readFileNoFollow, resolveInside } from "./fs-safe.js";
import type { BundleManifest, ConfigEntry } from "./manifest.js";
import { bundleManifestSchema, parseManifest, toolManifestSchema } from "./manifest.js";

const MANIFEST_MAX_BYTES = 256 * 1024;

export interface ToolDef {
  name: string;
  description: string;
  async: boolean;
  parameters: Record<string, ToolParameter>;
  /** The tool's directory (its working directory). */
  dir: string;
  /** Real path of the entrypoint, checked to lie inside `dir`. */
  entrypoint: string;
}

export interface Bundle {
  name: string;
  description: string;
  instructions?: string;
  config?: Record<string, ConfigEntry>;
  init?: { entrypoint: string; async: boolean };
  dir: string;
  /** Locally created (no `.git`), so the coder may edit it. */
  editable: boolean;
  tools: ToolDef[];
  /** Tools that were left out, with the reason. */
  skipped: string[];
}

/**
 * Reads bundles from the plugins directory on every call (a few small JSON files). A malformed or
 * hostile bundle or tool is skipped with a logged reason and never breaks the others.
 */
export class BundleStore {
  private readonly reported = new Set<string>();

  constructor(
    readonly pluginsDir: string,
    private readonly logger: Logger,
  ) {}

  async list(): Promise<Bundle[]> {
    const entries = await readdir(this.pluginsDir, { withFileTypes: true }).catch(() => []);
    const bundles: Bundle[] = [];
    for (const entry of entries) {
      if (!entry.isDirectory() || !PLUGIN_NAME_PATTERN.test(entry.name)) continue;
      const bundle = await this.tryLoad(entry.name);
      if (bundle) bundles.push(bundle);
    }
    return bundles.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The named bundle, or undefined when it does not exist or is invalid. */
  async get(name: string): Promise<Bundle | undefined> {
    if (!PLUGIN_NAME_PATTERN.test(name)) return undefined;
    const info = await lstat(join(this.pluginsDir, name)).catch(() => undefined);
    if (!info?.isDirectory()) return undefined;
    return this.tryLoad(name);
  }

  private async tryLoad(name: string): Promise<Bundle | undefined> {
    const dir = join(this.pluginsDir, name);
    try {
      const bundle = await loadBundle(dir, name);
      for (const reason of bundle.skipped) this.reportOnce(`plugin "${name}": ${reason}`);
      return bundle;
    } catch (error) {
      this.reportOnce(`plugin "${name}" skipped: ${(error as Error).message}`);
      return undefined;
    }
  }

  private reportOnce(message: string): void {
    if (this.reported.has(message)) return;
    if (this.reported.size > 1000) this.reported.clear();
    this.reported.add(message);
    this.logger.warn(message);
  }
}

/**
 * Loads and checks one bundle directory. `expectedName` is the directory's name for an installed
 * plugin (the manifest must agree), or undefined for a fresh clone (the manifest decides).
 * Throws with a reason when the bundle itself is unusable.
 */
export async function loadBundle(dir: string, expectedName: string | undefined): Promise<Bundle> {
  const manifest: BundleManifest = parseManifest(
    await readFileNoFollow(join(dir, "manifest.json"), MANIFEST_MAX_BYTES),
    bundleManifestSchema,
  );
  if (expectedName !== undefined && manifest.name !== expectedName) {
    throw new Error(`manifest name "${manifest.name}" does not match directory "${expectedName}"`);
  }
  const editable = (await lstat(join(dir, ".git")).catch(() => undefined)) === undefined;
  const tools: ToolDef[] = [];
  const skipped: string[] = [];
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    // Symlinked directories are ignored on purpose: a tool must live inside its bundle.
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const toolDir = join(dir, entry.name);
    const manifestInfo = await lstat(join(toolDir, "manifest.json")).catch(() => undefined);
    if (!manifestInfo) continue; // Not a tool (e.g. a library or node_modules directory).
    try {
      tools.push(await loadTool(toolDir, entry.name));
    } catch (error) {
      skipped.push(`tool "${entry.name}" skipped: ${(error as Error).message}`);
    }
  }
  return {
    name: manifest.name,
    description: manifest.description,
    instructions: manifest.instructions,
    config: manifest.config,
    init: manifest.init
      ? { entrypoint: manifest.init.entrypoint, async: manifest.init.async ?? false }
      : undefined,
    dir,
    editable,
    tools,
    skipped,
  };
}

async function loadTool(dir: string, dirName: string): Promise<ToolDef> {
  const manifest = parseManifest(
    await readFileNoFollow(join(dir, "manifest.json"), MANIFEST_MAX_BYTES),
    toolManifestSchema,
  );
  if (manifest.name !== dirName) {
    throw new Error(`manifest name "${manifest.name}" does not match directory "${dirName}"`);
  }
  let entrypoint: string;
  try {
    entrypoint = await resolveInside(dir, manifest.entrypoint);
  } catch (error) {
    throw new Error(`entrypoint ${(error as Error).message}`, { cause: error });
  }
  return {
    name: manifest.name,
    description: manifest.description,
    async: manifest.async ?? false,
    parameters: manifest.parameters,
    dir,
    entrypoint,
  };
}

/** `a (x: string, y: file), b` for "Tool not found" messages. */
export function describeTools(tools: readonly ToolDef[]): string {
  if (tools.length === 0) return "(none)";
  return tools
    .map((tool) => {
      const params = Object.entries(tool.parameters).map(([key, spec]) => `${key}: ${spec.type}`);
      return params.length > 0 ? `${tool.name} (${params.join(", ")})` : tool.name;
    })
    .join(", ");
}
