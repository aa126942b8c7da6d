import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { pathExists, readFileNoFollow, resolveInside } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import { parseManifest, pluginManifestSchema, toolManifestSchema } from "../manifest.js";
import type { Loaded, LoadRequest, Plugin, PluginFormat, ToolDef } from "./format.js";
import { MAX_TOOLS_PER_PLUGIN } from "./format.js";
import { runStavrobotInit, runStavrobotTool } from "./stavrobot-run.js";

const MANIFEST_MAX_BYTES = 256 * 1024;

/**
 * The Stavrobot format (the reference's): `manifest.json` at the root, one subdirectory per tool
 * with its own `manifest.json` and entrypoint, one process per call with exactly the parameters on
 * stdin (see the executor for the whole contract). No network declaration: its plugins keep network
 * unless the owner switches it off.
 */
export function stavrobotFormat(executor: Executor): PluginFormat {
  return {
    id: "stavrobot",
    recognise: (dir) => pathExists(join(dir, "manifest.json")),
    load: loadStavrobot,
    run: (plugin, tool, params, timeoutMs) => runStavrobotTool(executor, plugin, tool, params, timeoutMs),
    init: (plugin, timeoutMs) => runStavrobotInit(executor, plugin, timeoutMs),
    stop: async () => {},
    stopAll: async () => {},
  };
}

async function loadStavrobot({ dir, expectedName }: LoadRequest): Promise<Loaded> {
  const manifest = parseManifest(
    await readFileNoFollow(join(dir, "manifest.json"), MANIFEST_MAX_BYTES),
    pluginManifestSchema,
  );
  if (expectedName !== undefined && manifest.name !== expectedName) {
    throw new Error(`manifest name "${manifest.name}" does not match directory "${expectedName}"`);
  }
  const editable = (await lstat(join(dir, ".git")).catch(() => undefined)) === undefined;
  const tools: ToolDef[] = [];
  const skipped: string[] = [];
  const watched = [dir, join(dir, "manifest.json")];
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    // Symlinked directories are ignored on purpose: a tool must live inside its plugin.
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const toolDir = join(dir, entry.name);
    // Watched even when it is not a tool: adding a manifest there makes it one.
    watched.push(toolDir, join(toolDir, "manifest.json"));
    if (!(await lstat(join(toolDir, "manifest.json")).catch(() => undefined))) continue; // a library, node_modules…
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
    format: "stavrobot",
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
    declared: [],
    network: true,
    needsApproval: false,
  };
  return { plugin, watched };
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
