import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { readFileNoFollow } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { Loaded, LoadRequest, Plugin, PluginFormat, PluginSkill, ToolDef } from "./format.js";
import { flatParameters, FORMAT_TOOL_NAME, MAX_TOOLS_PER_PLUGIN } from "./format.js";
import { readConfigValues } from "../plugin-config.js";
import type { OsaurusHosts, OsaurusTarget } from "./osaurus-hosts.js";
import { parseOsaurusManifest, unmetRequirements } from "./osaurus-manifest.js";

/** What the runner wrote beside an installed Osaurus package: its marker file. */
export const OSAURUS_MARKER = "osaurus-plugin.json";

/** The marker's content (see osaurus/install.ts, which writes it). */
export interface OsaurusPackage {
  plugin_id: string;
  version: string;
  /** The shared library, relative to the plugin's directory. */
  library: string;
  verified: boolean;
  skills: PluginSkill[];
}

/** The manifest names another plugin than the directory it was installed as (the installer moves it). */
export class OsaurusNameError extends Error {
  override name = "OsaurusNameError";
  constructor(
    readonly manifestName: string,
    directory: string,
  ) {
    super(`the library's manifest names the plugin "${manifestName}", but its directory is "${directory}"`);
  }
}

/**
 * The Osaurus format: a shared library with the Osaurus C ABI, installed from its
 * `<plugin_id>-<version>.zip` (osaurus/install.ts writes the marker). The library is loaded in a
 * host process of its own in the plugin's sandbox (osaurus-hosts.ts); its tools are what
 * `get_manifest` answers. Each tool's `permission_policy` is kept: `ask` (and a missing or unknown
 * one) waits for the owner's approval, `deny` never runs; a tool needing a macOS permission is
 * unavailable. The payload is built as the real host builds it: `_secrets` (when any is set) and
 * `_context.working_directory` (the plugin's data directory).
 */
export function osaurusFormat(hosts: OsaurusHosts, executor: Executor): PluginFormat {
  return {
    id: "osaurus",
    recognise: async (dir) =>
      (await lstat(join(dir, OSAURUS_MARKER)).catch(() => undefined))?.isFile() ?? false,
    load: (request) => loadOsaurus(hosts, request),
    async run(plugin, tool, params, timeoutMs) {
      const pkg = await readPackage(plugin.dir);
      const target = targetOf(plugin, pkg);
      const secrets = await target.secrets();
      const prepared = await executor.prepareForRun(plugin.dir, plugin.name);
      const { dataRoot } = executor.pluginPaths(plugin, prepared, undefined);
      const payload: Record<string, unknown> = { ...params.values };
      if (Object.keys(secrets).length > 0) payload._secrets = secrets;
      payload._context = { working_directory: dataRoot };
      return hosts.invoke(target, tool.name, JSON.stringify(payload), secrets, timeoutMs);
    },
    stop: (plugin) => hosts.stop(plugin),
    stopAll: () => hosts.stopAll(),
  };
}

async function loadOsaurus(hosts: OsaurusHosts, { dir, expectedName }: LoadRequest): Promise<Loaded> {
  if (expectedName === undefined) {
    throw new Error(
      "an Osaurus plugin is installed from its <plugin_id>-<version>.zip, not from a repository",
    );
  }
  const pkg = await readPackage(dir);
  const base: Plugin = {
    name: expectedName,
    format: "osaurus",
    description: "",
    version: pkg.version,
    dir,
    editable: false,
    tools: [],
    skipped: [],
    declared: [],
    network: true,
    needsApproval: false,
    skills: pkg.skills,
    verified: pkg.verified,
  };
  const target = targetOf(base, pkg);
  const { manifest: text } = await hosts.manifest(target);
  const manifest = parseOsaurusManifest(text);
  if (manifest.name !== expectedName) throw new OsaurusNameError(manifest.name, expectedName);
  const plugin: Plugin = {
    ...base,
    description: manifest.description || `Osaurus plugin ${manifest.pluginId}.`,
    version: manifest.version ?? pkg.version,
    skipped: [...manifest.skipped],
    ...(Object.keys(manifest.secrets).length > 0 ? { config: manifest.secrets } : {}),
  };
  for (const tool of manifest.tools) {
    if (plugin.tools.length >= MAX_TOOLS_PER_PLUGIN) {
      plugin.skipped.push(
        `tool "${tool.id}" skipped: a plugin may have at most ${MAX_TOOLS_PER_PLUGIN} tools`,
      );
      continue;
    }
    if (!FORMAT_TOOL_NAME.test(tool.id)) {
      plugin.skipped.push(
        `tool "${tool.id.slice(0, 80)}" skipped: its id must be at most 64 letters, digits, _, - or .`,
      );
      continue;
    }
    const unavailable = unmetRequirements(tool.requirements);
    const def: ToolDef = {
      name: tool.id,
      description: tool.description,
      async: false,
      parameters: flatParameters(tool.parameters),
      schema: tool.parameters,
      dir,
      entrypoint: join(dir, pkg.library),
      policy: tool.policy,
      ...(unavailable ? { unavailable } : {}),
    };
    plugin.tools.push(def);
    for (const requirement of tool.requirements) plugin.declared.push(`${tool.id}: ${requirement}`);
    if (tool.policy === "deny") plugin.declared.push(`${tool.id}: never runs (permission_policy deny)`);
  }
  plugin.needsApproval = plugin.tools.some((tool) => tool.policy === "ask" && !tool.unavailable);
  return { plugin, watched: [dir, join(dir, OSAURUS_MARKER), join(dir, pkg.library)] };
}

function targetOf(plugin: Pick<Plugin, "name" | "dir" | "network">, pkg: OsaurusPackage): OsaurusTarget {
  return {
    plugin,
    library: pkg.library,
    secrets: async () => {
      const values = await readConfigValues(plugin.dir);
      const set: Record<string, string> = {};
      for (const [key, value] of Object.entries(values)) {
        if (typeof value === "string" && value.length > 0) set[key] = value;
      }
      return set;
    },
  };
}

async function readPackage(dir: string): Promise<OsaurusPackage> {
  let value: unknown;
  try {
    value = JSON.parse((await readFileNoFollow(join(dir, OSAURUS_MARKER), 256 * 1024)).toString("utf8"));
  } catch {
    throw new Error(`${OSAURUS_MARKER} is missing or not valid JSON`);
  }
  const record = value as Partial<OsaurusPackage> | null;
  if (
    !record ||
    typeof record.library !== "string" ||
    record.library.split("/").some((part) => part === ".." || part === "") ||
    typeof record.plugin_id !== "string" ||
    typeof record.version !== "string"
  ) {
    throw new Error(`${OSAURUS_MARKER} does not name the plugin's library`);
  }
  const skills = Array.isArray(record.skills)
    ? record.skills.filter(
        (skill): skill is PluginSkill =>
          !!skill &&
          typeof skill.name === "string" &&
          typeof skill.description === "string" &&
          typeof skill.file === "string",
      )
    : [];
  return {
    plugin_id: record.plugin_id,
    version: record.version,
    library: record.library,
    verified: record.verified === true,
    skills,
  };
}
