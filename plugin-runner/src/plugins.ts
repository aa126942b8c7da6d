import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { PLUGIN_NAME_PATTERN } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import type { DeclaredPlugins, Plugin } from "./formats/format.js";
import type { Formats } from "./formats/index.js";

/**
 * Parsed plugins of every format, cached. A cached plugin is reused while the modification times
 * of the files its format reads are unchanged, so a plugin edited by hand or by the coder is reread
 * on its next use, while a run of an unchanged plugin reads no JSON at all. Install, update, remove
 * and create also drop a plugin's entry explicitly. A malformed or hostile plugin or tool is skipped
 * with a logged reason and never breaks the others.
 */
export class PluginStore {
  private readonly reported = new Set<string>();
  private readonly cache = new Map<string, { plugin: Plugin; stamp: Map<string, number> }>();

  constructor(
    readonly pluginsDir: string,
    private readonly logger: Logger,
    private readonly formats: Formats,
    /** False rereads every manifest on every use (the bench's baseline). */
    private readonly caching = true,
    /** The owner's MCP servers: plugins too, and a directory of the same name is hidden by one. */
    private readonly declared?: DeclaredPlugins,
  ) {}

  /** Every valid plugin, sorted by name (MCP servers as they are now: a listing waits for none). */
  async list(): Promise<Plugin[]> {
    const entries = await readdir(this.pluginsDir, { withFileTypes: true }).catch(() => []);
    const plugins: Plugin[] = [];
    plugins.push(...((await this.declared?.list()) ?? []));
    for (const entry of entries) {
      if (!entry.isDirectory() || !PLUGIN_NAME_PATTERN.test(entry.name)) continue;
      if (this.declared?.has(entry.name)) {
        this.reportOnce(`plugin "${entry.name}" skipped: the owner declared an MCP server of that name`);
        continue;
      }
      const plugin = await this.get(entry.name);
      if (plugin) plugins.push(plugin);
    }
    return plugins.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Whether `name` is one of the owner's MCP servers (which nothing but config.toml changes). */
  async isMcpServer(name: string): Promise<boolean> {
    return (await this.declared?.declares(name)) ?? false;
  }

  /** The named plugin, or undefined when it does not exist or is invalid. */
  async get(name: string): Promise<Plugin | undefined> {
    if (!PLUGIN_NAME_PATTERN.test(name)) return undefined;
    const declared = await this.declared?.get(name);
    if (declared) return declared;
    const dir = join(this.pluginsDir, name);
    const cached = this.caching ? this.cache.get(name) : undefined;
    if (cached && (await stillFresh(cached.stamp))) return cached.plugin;
    const info = await lstat(dir).catch(() => undefined);
    if (!info?.isDirectory()) {
      this.cache.delete(name);
      return undefined;
    }
    try {
      const loaded = await this.formats.load({ dir, expectedName: name });
      for (const reason of loaded.plugin.skipped) this.reportOnce(`plugin "${name}": ${reason}`);
      this.cache.set(name, { plugin: loaded.plugin, stamp: await stampOf(loaded.watched) });
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

async function stampOf(paths: readonly string[]): Promise<Map<string, number>> {
  const mtimes = await Promise.all(paths.map(mtimeOf));
  return new Map(paths.map((path, index) => [path, mtimes[index] as number]));
}

async function stillFresh(stamp: Map<string, number>): Promise<boolean> {
  const paths = [...stamp.keys()];
  const now = await Promise.all(paths.map(mtimeOf));
  return paths.every((path, index) => stamp.get(path) === now[index]);
}

async function mtimeOf(path: string): Promise<number> {
  return (await lstat(path).catch(() => undefined))?.mtimeMs ?? -1;
}

/**
 * Tool names another plugin offers too. Tools are always called through their plugin's name, so
 * neither hides the other; the owner and the model are told, never left to find out.
 */
export async function toolClashes(plugins: PluginStore, plugin: Plugin): Promise<string[]> {
  const clashes: string[] = [];
  for (const other of await plugins.list()) {
    if (other.name === plugin.name) continue;
    for (const tool of plugin.tools) {
      if (other.tools.some((candidate) => candidate.name === tool.name)) {
        clashes.push(
          `Tool "${tool.name}" is also offered by plugin "${other.name}": each is run through its own plugin's name.`,
        );
      }
    }
  }
  return clashes;
}
