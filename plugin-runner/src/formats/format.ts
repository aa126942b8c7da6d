import type { ToolParameter } from "@stavrobot/common";
import type { RunOutcome } from "../chat-messages.js";
import type { Plugin, ToolDef } from "../plugins.js";
import type { ValidatedParams } from "../validate.js";

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
  /** Ends whatever the format keeps running for a plugin (before it is updated or removed). */
  stop(plugin: string): Promise<void>;
  /** Ends everything (the service stops). */
  stopAll(): Promise<void>;
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
