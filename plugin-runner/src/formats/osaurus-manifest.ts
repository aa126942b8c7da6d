import type { ConfigEntry } from "../manifest.js";
import type { JsonSchema } from "./format.js";
import { derivePluginName } from "./format.js";

/** How Osaurus lets a tool run: `auto` runs, `ask` waits for the owner, `deny` never runs. */
export type ToolPolicy = "auto" | "ask" | "deny";

export interface OsaurusTool {
  id: string;
  description: string;
  parameters: JsonSchema;
  requirements: string[];
  policy: ToolPolicy;
}

export interface OsaurusManifest {
  pluginId: string;
  /** `plugin_id` in our name form (lower case, `.` becomes `-`). */
  name: string;
  version?: string;
  description: string;
  /** The secrets it declares, as config keys the owner sets. */
  secrets: Record<string, ConfigEntry>;
  tools: OsaurusTool[];
  /** Tools left out, with the reason. */
  skipped: string[];
}

/**
 * The macOS permissions Osaurus knows (its docs and its host): a tool that needs one cannot run on
 * Linux. Any other requirement is the plugin's own and, as on Linux the real host's advice goes,
 * makes the tool wait for the owner's approval.
 */
export const MACOS_REQUIREMENTS: ReadonlySet<string> = new Set([
  "automation",
  "accessibility",
  "calendar",
  "contacts",
  "location",
  "maps",
  "notes",
  "reminders",
  "disk",
  "microphone",
  "screen_recording",
  "automation_calendar",
  "automation_mail",
]);

const EMPTY_SCHEMA: JsonSchema = { type: "object", properties: {} };

/** Reads what `get_manifest` answered; throws with a reason when it is not a usable manifest. */
export function parseOsaurusManifest(text: string): OsaurusManifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error("the plugin's manifest (get_manifest) is not valid JSON");
  }
  if (!isObject(value)) throw new Error("the plugin's manifest is not a JSON object");
  const pluginId = value.plugin_id;
  if (typeof pluginId !== "string" || pluginId.trim() === "")
    throw new Error("the plugin's manifest has no plugin_id");
  const name = osaurusName(pluginId);
  if (!name) throw new Error(`the manifest's plugin_id "${pluginId.slice(0, 80)}" gives no plugin name`);
  const capabilities = isObject(value.capabilities) ? value.capabilities : undefined;
  if (!capabilities) throw new Error("the plugin's manifest has no capabilities");
  const skipped: string[] = [];
  const tools: OsaurusTool[] = [];
  const rawTools = Array.isArray(capabilities.tools) ? capabilities.tools : [];
  for (const [index, raw] of rawTools.entries()) {
    if (!isObject(raw) || typeof raw.id !== "string" || raw.id === "") {
      skipped.push(`tool #${index + 1} skipped: it has no id`);
      continue;
    }
    if (tools.some((tool) => tool.id === raw.id)) {
      skipped.push(`tool "${raw.id.slice(0, 80)}" skipped: a tool of that id came before it`);
      continue;
    }
    tools.push({
      id: raw.id,
      description: typeof raw.description === "string" ? raw.description : "",
      parameters: isObject(raw.parameters) ? raw.parameters : EMPTY_SCHEMA,
      requirements: Array.isArray(raw.requirements)
        ? raw.requirements.filter((item): item is string => typeof item === "string")
        : [],
      policy: policyOf(raw.permission_policy),
    });
  }
  const secrets: Record<string, ConfigEntry> = {};
  for (const raw of Array.isArray(value.secrets) ? value.secrets : []) {
    if (!isObject(raw) || typeof raw.id !== "string" || raw.id === "" || raw.id === "permissions") continue;
    const label = typeof raw.label === "string" ? raw.label : raw.id;
    const about = typeof raw.description === "string" ? `: ${raw.description}` : "";
    const url = typeof raw.url === "string" ? ` (${raw.url})` : "";
    secrets[raw.id] = { description: `${label}${about}${url}`, required: raw.required === true };
  }
  return {
    pluginId,
    name,
    ...(typeof value.version === "string" ? { version: value.version } : {}),
    description: typeof value.description === "string" ? value.description : "",
    secrets,
    tools,
    skipped,
  };
}

/** `auto` and `deny` as written; anything else, a missing policy included, is `ask` (as the real host). */
export function policyOf(value: unknown): ToolPolicy {
  return value === "auto" || value === "deny" ? value : "ask";
}

/** An Osaurus `plugin_id` in our name form: lower case, `.` and `_` become `-`. */
export function osaurusName(pluginId: string): string | undefined {
  return derivePluginName(pluginId);
}

/** Why a tool cannot run on this machine (a macOS permission), or undefined when it can. */
export function unmetRequirements(requirements: readonly string[]): string | undefined {
  const macos = requirements.filter((requirement) => MACOS_REQUIREMENTS.has(requirement));
  if (macos.length === 0) return undefined;
  return (
    `This tool needs the macOS permission${macos.length > 1 ? "s" : ""} ${macos.join(", ")}, ` +
    "which this Linux machine cannot grant: it is unavailable here."
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
