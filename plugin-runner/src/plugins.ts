import { lstat, readdir } from "node:fs/promises";
import type { Stats } from "node:fs";
import { join } from "node:path";
import { PLUGIN_NAME_PATTERN } from "@stavrobot/common";
import type { Logger, ToolParameter } from "@stavrobot/common";
import { readFileNoFollow, resolveInside } from "@stavrobot/common";
import type { ConfigEntry, PluginManifest } from "./manifest.js";
import { parseManifest, pluginManifestSchema, toolManifestSchema } from "./manifest.js";

const MANIFEST_MAX_BYTES = 256 * 1024;
/** More tools than this in one plugin are left out (with a warning): no assistant needs them. */
export const MAX_TOOLS_PER_PLUGIN = 256;

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

/** A plugin as read from its directory: its manifest, its tools and what was left out. */
export interface Plugin {
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

/** Modification times that tell whether a cached plugin is still what is on disk. */
interface Stamp {
  dir: number;
  manifest: number;
  tools: { dir: string; dirMtime: number; manifestMtime: number }[];
}

/**
 * Parsed plugins, cached. A cached plugin is reused while the modification times of its directory,
 * its manifest and its tools' directories and manifests are unchanged, so a plugin edited by hand
 * or by the coder is reread on its next use, while a run of an unchanged plugin reads no JSON at
 * all. Install, update, remove and create also drop a plugin's entry explicitly. A malformed or
 * hostile plugin or tool is skipped with a logged reason and never breaks the others.
 */
export class PluginStore {
  private readonly reported = new Set<string>();
  private readonly cache = new Map<string, { plugin: Plugin; stamp: Stamp }>();

  constructor(
    readonly pluginsDir: string,
    private readonly logger: Logger,
    /** False rereads every manifest on every use (the bench's baseline). */
    private readonly caching = true,
  ) {}

  /** Every valid plugin, sorted by name. */
  async list(): Promise<Plugin[]> {
    const entries = await readdir(this.pluginsDir, { withFileTypes: true }).catch(() => []);
    const plugins: Plugin[] = [];
    for (const entry of entries) {
      if (!entry.isDirectory() || !PLUGIN_NAME_PATTERN.test(entry.name)) continue;
      const plugin = await this.get(entry.name);
      if (plugin) plugins.push(plugin);
    }
    return plugins.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The named plugin, or undefined when it does not exist or is invalid. */
  async get(name: string): Promise<Plugin | undefined> {
    if (!PLUGIN_NAME_PATTERN.test(name)) return undefined;
    const dir = join(this.pluginsDir, name);
    const cached = this.caching ? this.cache.get(name) : undefined;
    if (cached && (await stillFresh(dir, cached.stamp))) return cached.plugin;
    const info = await lstat(dir).catch(() => undefined);
    if (!info?.isDirectory()) {
      this.cache.delete(name);
      return undefined;
    }
    try {
      const loaded = await loadPluginStamped(dir, name);
      for (const reason of loaded.plugin.skipped) this.reportOnce(`plugin "${name}": ${reason}`);
      this.cache.set(name, loaded);
      return loaded.plugin;
    } catch (error) {
      this.cache.delete(name);
      this.reportOnce(`plugin "${name}" skipped: ${(error as Error).message}`);
      return undefined;
    }
  }

  /** Forgets a plugin (or all): the next use reads it from disk. */
  invalidate(name?: string): void {
    if (name === undefined) this.cache.clear();
    else this.cache.delete(name);
  }

  private reportOnce(message: string): void {
    if (this.reported.has(message)) return;
    if (this.reported.size > 1000) this.reported.clear();
    this.reported.add(message);
    this.logger.warn(message);
  }
}

async function stillFresh(dir: string, stamp: Stamp): Promise<boolean> {
  const [dirInfo, manifestInfo] = await Promise.all([
    lstat(dir).catch(() => undefined),
    lstat(join(dir, "manifest.json")).catch(() => undefined),
  ]);
  if (!dirInfo?.isDirectory() || mtime(dirInfo) !== stamp.dir || mtime(manifestInfo) !== stamp.manifest) {
    return false;
  }
  for (const tool of stamp.tools) {
    const [toolDir, toolManifest] = await Promise.all([
      lstat(tool.dir).catch(() => undefined),
      lstat(join(tool.dir, "manifest.json")).catch(() => undefined),
    ]);
    if (mtime(toolDir) !== tool.dirMtime || mtime(toolManifest) !== tool.manifestMtime) return false;
  }
  return true;
}

function mtime(info: Stats | undefined): number {
  return info ? info.mtimeMs : -1;
}

/**
 * Loads and checks one plugin directory. `expectedName` is the directory's name for an installed
 * plugin (the manifest must agree), or undefined for a fresh clone (the manifest decides).
 * Throws with a reason when the plugin itself is unusable.
 */
export async function loadPlugin(dir: string, expectedName: string | undefined): Promise<Plugin> {
  return (await loadPluginStamped(dir, expectedName)).plugin;
}

async function loadPluginStamped(
  dir: string,
  expectedName: string | undefined,
): Promise<{ plugin: Plugin; stamp: Stamp }> {
  const dirInfo = await lstat(dir);
  const manifestInfo = await lstat(join(dir, "manifest.json")).catch(() => undefined);
  const manifest: PluginManifest = parseManifest(
    await readFileNoFollow(join(dir, "manifest.json"), MANIFEST_MAX_BYTES),
    pluginManifestSchema,
  );
  if (expectedName !== undefined && manifest.name !== expectedName) {
    throw new Error(`manifest name "${manifest.name}" does not match directory "${expectedName}"`);
  }
  const editable = (await lstat(join(dir, ".git")).catch(() => undefined)) === undefined;
  const tools: ToolDef[] = [];
  const skipped: string[] = [];
  const stamp: Stamp = { dir: dirInfo.mtimeMs, manifest: mtime(manifestInfo), tools: [] };
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    // Symlinked directories are ignored on purpose: a tool must live inside its plugin.
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const toolDir = join(dir, entry.name);
    const toolDirInfo = await lstat(toolDir).catch(() => undefined);
    const toolManifestInfo = await lstat(join(toolDir, "manifest.json")).catch(() => undefined);
    // Watched even when it is not a tool: adding a manifest there makes it one.
    stamp.tools.push({ dir: toolDir, dirMtime: mtime(toolDirInfo), manifestMtime: mtime(toolManifestInfo) });
    if (!toolManifestInfo) continue; // Not a tool (e.g. a library or node_modules directory).
    if (tools.length >= MAX_TOOLS_PER_PLUGIN) {
      skipped.push(`tool "${entry.name}" skipped: a bundle may have at most ${MAX_TOOLS_PER_PLUGIN} tools`);
      continue;
    }
    try {
      tools.push(await loadTool(toolDir, entry.name));
    } catch (error) {
      skipped.push(`tool "${entry.name}" skipped: ${(error as Error).message}`);
    }
  }
  const plugin: Plugin = {
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
  return { plugin, stamp };
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

/** `x (string), y (file)` — a tool's parameters for error messages, capped at ten. */
export function describeParameters(parameters: Record<string, ToolParameter>): string {
  const entries = Object.entries(parameters);
  if (entries.length === 0) return "(none)";
  const shown = entries.slice(0, 10).map(([key, spec]) => `${key} (${spec.type})`);
  if (entries.length > 10) shown.push(`and ${entries.length - 10} more`);
  return shown.join(", ");
}

/** `a (x: string, y: file), b` for "Tool not found" messages (at most 20 tools named). */
export function describeTools(tools: readonly ToolDef[]): string {
  if (tools.length === 0) return "(none)";
  const shown = tools.slice(0, 20).map((tool) => {
    const params = Object.entries(tool.parameters).map(([key, spec]) => `${key}: ${spec.type}`);
    return params.length > 0 ? `${tool.name} (${params.join(", ")})` : tool.name;
  });
  if (tools.length > 20) shown.push(`and ${tools.length - 20} more`);
  return shown.join(", ");
}
