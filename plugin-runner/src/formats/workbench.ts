import { lstat } from "node:fs/promises";
import { basename, join } from "node:path";
import { PLUGIN_NAME_PATTERN, readFileNoFollow } from "@stavrobot/common";
import type { JsonSchema, Loaded, LoadRequest, Plugin, PluginFormat, ToolDef } from "./format.js";
import { derivePluginName, flatParameters, FORMAT_TOOL_NAME, MAX_TOOLS_PER_PLUGIN } from "./format.js";
import type { WorkbenchHosts } from "./workbench-hosts.js";

const PACKAGE_MAX_BYTES = 256 * 1024;
const EMPTY_SCHEMA: JsonSchema = { type: "object", properties: {} };

/**
 * The Workbench format: a folder with `package.json` and `index.js` whose `register(api)` calls
 * `api.registerTool({name, description?, inputSchema, run})`. Each plugin runs in a Node process of
 * its own (see workbench-hosts.ts), so its tools are known once it is loaded there, and a `run()`
 * that never returns is killed at the time limit. Results are normalised as Workbench does (see
 * workbench-result.ts). No network declaration: its plugins keep network unless the owner says no.
 */
export function workbenchFormat(hosts: WorkbenchHosts): PluginFormat {
  return {
    id: "workbench",
    recognise: async (dir) =>
      (await isFile(join(dir, "package.json"))) && (await isFile(join(dir, "index.js"))),
    load: (request) => loadWorkbench(hosts, request),
    run: (plugin, tool, params, timeoutMs) => hosts.run(plugin, tool.name, params.values, timeoutMs),
    stop: (plugin) => hosts.stop(plugin),
    stopAll: () => hosts.stopAll(),
  };
}

async function loadWorkbench(
  hosts: WorkbenchHosts,
  { dir, expectedName, fallbackName }: LoadRequest,
): Promise<Loaded> {
  const pkg = await readPackage(dir);
  const own = typeof pkg.name === "string" ? pkg.name.replace(/^@[^/]+\//, "") : undefined;
  const name =
    (own && PLUGIN_NAME_PATTERN.test(own) ? own : undefined) ??
    (own ? derivePluginName(own) : undefined) ??
    derivePluginName(expectedName ?? fallbackName ?? basename(dir));
  if (!name) throw new Error("no plugin name: package.json has none and the folder's name gives none");
  if (expectedName !== undefined && name !== expectedName) {
    throw new Error(`package.json names the plugin "${name}", but its directory is "${expectedName}"`);
  }
  const plugin: Plugin = {
    name,
    format: "workbench",
    description: typeof pkg.description === "string" ? pkg.description : "",
    ...(typeof pkg.version === "string" ? { version: pkg.version } : {}),
    dir,
    editable: (await lstat(join(dir, ".git")).catch(() => undefined)) === undefined,
    tools: [],
    skipped: [],
    declared: [],
    network: true,
    needsApproval: false,
  };
  const watched = [dir, join(dir, "package.json"), join(dir, "index.js")];
  // A fresh clone is only named: its code runs once it is installed, as its own user.
  if (expectedName === undefined) return { plugin, watched };
  const hosted = await hosts.tools(plugin);
  plugin.skipped.push(...hosted.skipped);
  for (const tool of hosted.tools) {
    if (plugin.tools.length >= MAX_TOOLS_PER_PLUGIN) {
      plugin.skipped.push(
        `tool "${tool.name}" skipped: a plugin may have at most ${MAX_TOOLS_PER_PLUGIN} tools`,
      );
    } else if (!FORMAT_TOOL_NAME.test(tool.name)) {
      plugin.skipped.push(
        `tool "${tool.name.slice(0, 80)}" skipped: its name must be at most 64 letters, digits, _, - or .`,
      );
    } else {
      plugin.tools.push(toolDef(dir, tool.name, tool.description, tool.inputSchema));
    }
  }
  if (!plugin.description)
    plugin.description = `Workbench plugin with ${plugin.tools.map((tool) => tool.name).join(", ") || "no tools"}.`;
  return { plugin, watched };
}

function toolDef(dir: string, name: string, description: string, inputSchema: unknown): ToolDef {
  const schema =
    inputSchema && typeof inputSchema === "object" && !Array.isArray(inputSchema)
      ? (inputSchema as JsonSchema)
      : EMPTY_SCHEMA;
  return {
    name,
    description,
    async: false,
    parameters: flatParameters(schema),
    schema,
    dir,
    entrypoint: join(dir, "index.js"),
  };
}

async function readPackage(dir: string): Promise<Record<string, unknown>> {
  let value: unknown;
  try {
    value = JSON.parse(
      (await readFileNoFollow(join(dir, "package.json"), PACKAGE_MAX_BYTES)).toString("utf8"),
    );
  } catch {
    throw new Error("package.json is not valid JSON");
  }
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw new Error("package.json is not a JSON object");
  return value as Record<string, unknown>;
}

async function isFile(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined))?.isFile() ?? false;
}
