import type { InstallResponse, McpServerStatus, ToolParameter } from "@stavrobot/common";
import type { RunOutcome } from "../chat-messages.js";
import type { ConfigEntry } from "../manifest.js";
import type { ValidatedParams } from "../validate.js";

// The seam between the runner and its plugin formats. This module holds what both sides share: the
// one plugin model every format reads its plugins into, the interface a format implements, and the
// interface through which plugins declared elsewhere (MCP servers) reach the registry. Formats
// (formats/<format>*.ts, mcp/, osaurus/) import this module and the sandbox (executor.ts); the
// registry, the executor, the lifecycle and the routes import this module and never a format. The
// formats are made and handed in by the composition root, host.ts. The import test
// (imports.test.ts) keeps it so.

/**
 * One plugin format: how a plugin of that kind is recognised on disk, read into the one plugin
 * model (a plugin with tools whose parameters are JSON Schema, or Stavrobot's flat map), run and
 * stopped. Everything else (install, update, remove, permissions, approval, network, the routes and
 * the app) is the same for every format.
 *
 * Formats that spawn a process per call (Stavrobot, Cyclop One) keep nothing between calls; formats
 * that keep a process (Workbench here; MCP servers and Osaurus libraries next) start it through the
 * sandbox's long-lived processes, learn their tools from it, and end it in `stop`.
 */
export type FormatId = "stavrobot" | "cyclopone" | "workbench" | "mcp" | "osaurus";

/** The directory formats in the order a directory is tried (the first whose marker file is there wins). */
export const FORMAT_IDS: readonly FormatId[] = ["osaurus", "stavrobot", "cyclopone", "workbench"];

/** How the owner and the model see each format's name. */
export const FORMAT_LABELS: Readonly<Record<FormatId, string>> = {
  stavrobot: "Stavrobot",
  cyclopone: "Cyclop One",
  workbench: "Workbench",
  mcp: "MCP server",
  osaurus: "Osaurus",
};

/** A JSON Schema object as a plugin declared it (kept as given, checked with a validator). */
export type JsonSchema = Record<string, unknown>;

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

export interface LoadRequest {
  /** The plugin's directory. */
  dir: string;
  /**
   * The installed plugin's name (its directory's): the plugin must agree with it. Undefined for a
   * fresh clone, where the format decides the name.
   */
  expectedName?: string;
  /** For a fresh clone, the name to fall back on when the format has none (folder or repository). */
  fallbackName?: string;
}

/** What a format read from a directory, with the files whose modification times say it is still current. */
export interface Loaded {
  plugin: Plugin;
  /** Paths (files or directories) whose mtimes are compared before a cached plugin is reused. */
  watched: string[];
}

/** How far a running tool has got, where its format says (MCP's progress notifications). */
export interface RunProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface PluginFormat {
  readonly id: FormatId;
  /** Whether `dir` holds a plugin of this format (by its marker files only: nothing is run). */
  recognise(dir: string): Promise<boolean>;
  /** Reads the plugin; throws with a reason when it is unusable. Malformed tools are `skipped`. */
  load(request: LoadRequest): Promise<Loaded>;
  /** Runs one tool with checked parameters; a failure of the tool is an outcome, not an exception. */
  run(
    plugin: Plugin,
    tool: ToolDef,
    params: ValidatedParams,
    timeoutMs: number,
    onProgress?: (progress: RunProgress) => void,
  ): Promise<RunOutcome>;
  /**
   * Runs the plugin's init script after an install or update, for formats whose plugins declare
   * one (Stavrobot's `init`); its output is the init output the owner is shown.
   */
  init?(plugin: Plugin, timeoutMs: number): Promise<RunOutcome>;
  /** Ends whatever the format keeps running for a plugin (before it is updated or removed). */
  stop(plugin: string): Promise<void>;
  /** Ends everything (the service stops). */
  stopAll(): Promise<void>;
}

/**
 * Plugins the owner declares in config.toml rather than installs (MCP servers): the registry lists
 * them beside the plugins directory's, and a directory of the same name is hidden by one. Handed to
 * the registry by the composition root, so the registry never knows what declares them.
 */
export interface DeclaredPlugins {
  /** Every declared plugin as it is now (a listing waits for none to finish starting). */
  list(): Promise<Plugin[]>;
  /** Whether `name` is declared, as last read (without reading the declarations again). */
  has(name: string): boolean;
  /** Whether `name` is declared (after reading the declarations again if they changed). */
  declares(name: string): Promise<boolean>;
  /** The declared plugin, once it finished starting (or gave up); undefined when not declared. */
  get(name: string): Promise<Plugin | undefined>;
}

/**
 * Tool names of the formats that name their own (Cyclop One's `snake_case`, Workbench's
 * `category.toolName`): they become URL segments, so `.` and `..` alone, slashes and spaces are not,
 * and the owner's permissions name them, so at most 64 characters.
 */
export const FORMAT_TOOL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** The flat `{name: {type, description}}` view of a JSON Schema's top-level properties (for lists and files). */
export function flatParameters(schema: JsonSchema | undefined): Record<string, ToolParameter> {
  const properties = schema?.properties;
  if (!properties || typeof properties !== "object" || Array.isArray(properties)) return {};
  const flat: Record<string, ToolParameter> = {};
  for (const [key, value] of Object.entries(properties as Record<string, unknown>)) {
    const spec = value && typeof value === "object" ? (value as Record<string, unknown>) : {};
    const type = Array.isArray(spec.type)
      ? spec.type.join("|")
      : typeof spec.type === "string"
        ? spec.type
        : "any";
    flat[key] = { type, description: typeof spec.description === "string" ? spec.description : "" };
  }
  return flat;
}

/**
 * A plugin name from any text: lower case, `_`, `.` and spaces become `-`, anything else outside
 * `[a-z0-9-]` is dropped, runs of `-` are one, none at either end, at most 64 characters.
 * Undefined when nothing is left.
 */
export function derivePluginName(text: string): string | undefined {
  const name = text
    .toLowerCase()
    .replace(/[_.\s]+/g, "-")
    .replace(/[^a-z0-9-]/g, "")
    .replace(/-+/g, "-")
    .replace(/^-|-$/g, "")
    .slice(0, 64)
    .replace(/-$/, "");
  return name.length > 0 ? name : undefined;
}

/** A plugin package file to install (Osaurus's `<plugin_id>-<version>.zip`): its name, bytes and signature. */
export interface PackageSource {
  fileName: string;
  bytes: Buffer;
  /** The `.minisig` text, when one was found. */
  signature?: string;
}

/** The lifecycle's steps a package install calls (under the lifecycle's lock). */
export interface PackageInstallSteps {
  refuseMcpServer(name: string): Promise<void>;
  setUp(name: string): Promise<InstallResponse>;
  purge(name: string): Promise<void>;
}

/**
 * Installs plugins that come as package files rather than git repositories (Osaurus packages),
 * handed to the lifecycle by the composition root.
 */
export interface PackageInstaller {
  /** Whether an install URL names such a package (rather than a git repository). */
  isPackageUrl(url: string): boolean;
  /** Downloads the package, with its signature where one is wanted. */
  download(url: string, timeoutMs: number): Promise<PackageSource>;
  /** Checks, unpacks and places the package, then sets the plugin up through the lifecycle's steps. */
  install(source: PackageSource, steps: PackageInstallSteps): Promise<InstallResponse>;
}
