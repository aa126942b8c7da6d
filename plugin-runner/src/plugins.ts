import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { PLUGIN_NAME_PATTERN } from "@stavrobot/common";
import type { Logger, McpServerStatus, ToolParameter } from "@stavrobot/common";
import type { FormatId, Formats, JsonSchema } from "./formats/index.js";
import type { ConfigEntry } from "./manifest.js";
import type { McpServers } from "./mcp/servers.js";

/** More tools than this in one plugin are left out (with a warning): no assistant needs them. */
export const MAX_TOOLS_PER_PLUGIN = 256;

export interface ToolDef {
  name: string;
  description: string;
  async: boolean;
  /** Stavrobot's flat parameters as declared; for JSON Schema formats, a flat view of `schema`. */
  parameters: Record<string, ToolParameter>;
  /** The JSON Schema the plugin declared (formats that have one); parameters are checked against it. */
  schema?: JsonSchema;
  /** The tool's directory (its working directory). */
  dir: string;
  /** Real path of the entrypoint, checked to lie inside the plugin. */
  entrypoint: string;
  /** Osaurus's `permission_policy`: `ask` waits for the owner's approval, `deny` never runs. */
  policy?: "auto" | "ask" | "deny";
  /** Why the tool cannot run on this machine (an Osaurus tool that needs a macOS permission). */
  unavailable?: string;
  /** An MCP server's `readOnlyHint` for the tool (the app believes it only where the owner says). */
  readOnlyHint?: boolean;
}

/** A skill (Agent Skills' SKILL.md) a plugin ships, offered to the model. */
export interface PluginSkill {
  name: string;
  description: string;
  /** The SKILL.md, relative to the plugin's directory. */
  file: string;
}

/** A plugin as read from its directory, whatever its format: its manifest, its tools and what was left out. */
export interface Plugin {
  name: string;
  format: FormatId;
  description: string;
  /** The version the plugin declares, when its format has one (approvals are per version). */
  version?: string;
  instructions?: string;
  config?: Record<string, ConfigEntry>;
  init?: { entrypoint: string; async: boolean };
  dir: string;
  /** Locally created (no `.git`), so the coder may edit it. */
  editable: boolean;
  tools: ToolDef[];
  /** Tools that were left out, with the reason. */
  skipped: string[];
  /** The permissions the plugin asked for, in its format's words (shown to the owner). */
  declared: string[];
  /** Whether the plugin may have network by its own declaration (formats without one: true). */
  network: boolean;
  /** Whether its tools wait for the owner's approval (per version) before they run. */
  needsApproval: boolean;
  /** An MCP server's transport and state when it was read. */
  server?: McpServerStatus;
  /** The longest a sync run may take, when longer than other formats' (an MCP server's questions). */
  runSeconds?: number;
  /** The skills it ships (Osaurus). */
  skills?: PluginSkill[];
  /** Whether its package's signature was checked against a trusted key at install (Osaurus). */
  verified?: boolean;
}

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
    private readonly mcp?: McpServers,
  ) {}

  /** Every valid plugin, sorted by name (MCP servers as they are now: a listing waits for none). */
  async list(): Promise<Plugin[]> {
    const entries = await readdir(this.pluginsDir, { withFileTypes: true }).catch(() => []);
    const plugins: Plugin[] = [];
    const servers = (await this.mcp?.all()) ?? [];
    for (const server of servers) plugins.push(await (this.mcp as McpServers).plugin(server, false));
    for (const entry of entries) {
      if (!entry.isDirectory() || !PLUGIN_NAME_PATTERN.test(entry.name)) continue;
      if (this.mcp?.has(entry.name)) {
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
    return (await this.mcp?.get(name)) !== undefined;
  }

  /** The named plugin, or undefined when it does not exist or is invalid. */
  async get(name: string): Promise<Plugin | undefined> {
    if (!PLUGIN_NAME_PATTERN.test(name)) return undefined;
    const server = await this.mcp?.get(name);
    if (server) return (this.mcp as McpServers).plugin(server, true);
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
