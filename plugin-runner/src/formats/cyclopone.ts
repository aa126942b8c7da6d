import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { PLUGIN_NAME_PATTERN, formatZodError, readFileNoFollow, resolveInside } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { JsonSchema, Loaded, LoadRequest, Plugin, PluginFormat, ToolDef } from "./format.js";
import { derivePluginName, flatParameters, FORMAT_TOOL_NAME, MAX_TOOLS_PER_PLUGIN } from "./format.js";
import { runCyclopOneTool } from "./cyclopone-run.js";

const MANIFEST_MAX_BYTES = 256 * 1024;

/**
 * `plugin.json` as both Cyclop One generations write it: the documented one (a top-level
 * `entrypoint`) and the current one (an `entrypoint` per tool, which wins). Fields the runner does
 * not use (`author`, `triggers`, `steps`, …) are ignored.
 */
const toolSchema = z.object({
  name: z.string().min(1).max(200),
  description: z.string().max(20_000).optional(),
  input_schema: z.record(z.string(), z.unknown()).optional(),
  entrypoint: z.string().min(1).max(1000).optional(),
});
const manifestSchema = z.object({
  name: z.string().min(1).max(200),
  version: z.string().max(100).optional(),
  description: z.string().max(20_000).optional(),
  entrypoint: z.string().min(1).max(1000).optional(),
  permissions: z.array(z.string().max(100)).max(100).optional(),
  tools: z.array(z.unknown()).min(1, "at least one tool is required"),
});

const EMPTY_SCHEMA: JsonSchema = { type: "object", properties: {} };

/**
 * The Cyclop One format: `plugin.json` at the root, one process per call with
 * `{tool, input, context: {plugin_dir, data_dir}}` on stdin and `{result, is_error}` back (see
 * cyclopone-run.ts). It declares its permissions; the word `network` (both generations spell it so)
 * is what gives it network. Its tools wait for the owner's approval, again for every new version.
 */
export function cyclopOneFormat(executor: Executor): PluginFormat {
  return {
    id: "cyclopone",
    recognise: async (dir) =>
      (await lstat(join(dir, "plugin.json")).catch(() => undefined))?.isFile() ?? false,
    load: loadCyclopOne,
    run: (plugin, tool, params, timeoutMs) => runCyclopOneTool(executor, plugin, tool, params, timeoutMs),
    stop: async () => {},
    stopAll: async () => {},
  };
}

async function loadCyclopOne({ dir, expectedName }: LoadRequest): Promise<Loaded> {
  const raw = await readFileNoFollow(join(dir, "plugin.json"), MANIFEST_MAX_BYTES);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new Error("plugin.json is not valid JSON");
  }
  const parsed = manifestSchema.safeParse(value);
  if (!parsed.success) throw new Error(`plugin.json is invalid: ${formatZodError(parsed.error)}`);
  const manifest = parsed.data;
  const name = PLUGIN_NAME_PATTERN.test(manifest.name) ? manifest.name : derivePluginName(manifest.name);
  if (!name) throw new Error(`plugin.json's name "${manifest.name}" gives no usable plugin name`);
  if (expectedName !== undefined && name !== expectedName) {
    throw new Error(`plugin.json names the plugin "${name}", but its directory is "${expectedName}"`);
  }
  const tools: ToolDef[] = [];
  const skipped: string[] = [];
  for (const [index, entry] of manifest.tools.entries()) {
    const tool = toolSchema.safeParse(entry);
    const label = tool.success ? `tool "${tool.data.name}"` : `tool #${index + 1}`;
    if (!tool.success) {
      skipped.push(`${label} skipped: ${formatZodError(tool.error)}`);
      continue;
    }
    if (tools.length >= MAX_TOOLS_PER_PLUGIN) {
      skipped.push(`${label} skipped: a plugin may have at most ${MAX_TOOLS_PER_PLUGIN} tools`);
      continue;
    }
    try {
      tools.push(await loadTool(dir, tool.data, manifest.entrypoint, tools));
    } catch (error) {
      skipped.push(`${label} skipped: ${(error as Error).message}`);
    }
  }
  const permissions = manifest.permissions ?? [];
  const plugin: Plugin = {
    name,
    format: "cyclopone",
    description: manifest.description ?? "",
    version: manifest.version ?? "unversioned",
    dir,
    editable: (await lstat(join(dir, ".git")).catch(() => undefined)) === undefined,
    tools,
    skipped,
    declared: permissions,
    network: permissions.includes("network"),
    needsApproval: true,
  };
  return { plugin, watched: [dir, join(dir, "plugin.json")] };
}

async function loadTool(
  dir: string,
  tool: z.infer<typeof toolSchema>,
  fallback: string | undefined,
  known: readonly ToolDef[],
): Promise<ToolDef> {
  if (!FORMAT_TOOL_NAME.test(tool.name))
    throw new Error("its name must be at most 64 letters, digits, _, - or .");
  if (known.some((other) => other.name === tool.name))
    throw new Error("another tool of the plugin has that name");
  const entrypoint = tool.entrypoint ?? fallback;
  if (!entrypoint) throw new Error("it has no entrypoint (neither its own nor the plugin's)");
  if (entrypoint.startsWith("/") || entrypoint.split(/[\\/]/).includes("..")) {
    throw new Error(`its entrypoint "${entrypoint}" must be a relative path inside the plugin`);
  }
  let real: string;
  try {
    real = await resolveInside(dir, entrypoint);
  } catch (error) {
    throw new Error(`its entrypoint ${(error as Error).message}`, { cause: error });
  }
  const schema = tool.input_schema ?? EMPTY_SCHEMA;
  return {
    name: tool.name,
    description: tool.description ?? "",
    async: false,
    parameters: flatParameters(schema),
    schema,
    dir,
    entrypoint: real,
  };
}
