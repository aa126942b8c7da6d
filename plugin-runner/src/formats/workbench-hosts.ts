import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { JsonLines, KeptProcess } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { RunOutcome } from "../chat-messages.js";
import type { Plugin } from "./format.js";
import { normaliseToolResponse, responseOutcome, thrownResponse } from "./workbench-result.js";
import { KeptHosts, loadInHost, placeHostScript, requestHost, type KeptHost } from "./kept-hosts.js";

/** A tool as the host reports it after `register(api)`. */
export interface HostedTool {
  name: string;
  description: string;
  inputSchema?: unknown;
}

/** Its stamp: the modification times of the plugin's files when its host loaded them. */
interface Host extends KeptHost {
  tools: HostedTool[];
  skipped: string[];
}

const HOST_SCRIPT = "workbench-host.cjs";

/**
 * One kept Node process per Workbench plugin, each the host script in the plugin's sandbox: started
 * when the plugin is first read (its tools are what `register(api)` registered), restarted after a
 * crash or a run that outlived its time (a CPU loop is killed, not waited for), started again when
 * the plugin's files change, and stopped when the plugin is updated or removed.
 */
export class WorkbenchHosts extends KeptHosts<Host> {
  constructor(
    private readonly executor: Executor,
    private readonly logger: Logger,
    /** Told when a plugin's tools changed without its files changing (it called reloadPlugins()). */
    private readonly changed: (plugin: string) => void,
  ) {
    super(500);
  }

  /** The plugin's tools, from its running host (started, or restarted if its files changed). */
  async tools(plugin: Plugin): Promise<{ tools: HostedTool[]; skipped: string[] }> {
    const stamp = await stampOf(plugin.dir);
    const host = await this.loaded(plugin.name, stamp, () => this.create(plugin, stamp));
    return { tools: host.tools, skipped: host.skipped };
  }

  /** Runs a tool in the plugin's host; past `timeoutMs` the host is killed and started again. */
  async run(
    plugin: Plugin,
    tool: string,
    input: Record<string, unknown>,
    timeoutMs: number,
  ): Promise<RunOutcome> {
    const host = await this.forCall(plugin.name, async () => this.create(plugin, await stampOf(plugin.dir)));
    const called = await requestHost(
      host,
      { op: "run", tool, input },
      timeoutMs,
      this.executor,
      (error) => `The plugin's process ended while the tool ran. ${error.message}`,
    );
    if ("failed" in called) return called.failed;
    const { answer } = called;
    if (answer.ok !== true) {
      const message = typeof answer.error === "string" ? answer.error : "unknown error";
      if (answer.thrown === true) return responseOutcome(thrownResponse(message));
      return { success: false, error: message };
    }
    const value = answer.undefined === true ? undefined : answer.result;
    return responseOutcome(normaliseToolResponse(value));
  }

  private create(plugin: Plugin, stamp: string): Host {
    const { executor, logger } = this;
    const host: Host = {
      stamp,
      tools: [],
      skipped: [],
      kept: new KeptProcess<JsonLines>({
        name: `workbench:${plugin.name}`,
        logger,
        start: async () => {
          const prepared = await executor.prepareForRun(plugin.dir, plugin.name);
          await placeHostScript(prepared.cache, HOST_SCRIPT);
          const paths = executor.pluginPaths(plugin, prepared, undefined);
          const process = executor.startKept(prepared, paths, {
            command: "node",
            args: [`${paths.cacheRoot}/${HOST_SCRIPT}`],
            cwd: paths.pluginRoot,
            env: { WORKBENCH_PLUGIN_DIR: paths.pluginRoot },
          });
          const session = new JsonLines(process);
          session.onMessage((message) => {
            if (message.event !== "tools") return;
            host.tools = hostedTools(message.tools);
            host.skipped = strings(message.skipped);
            this.changed(plugin.name);
          });
          const loaded = await loadInHost(session, { op: "load" }, "index.js");
          host.tools = hostedTools(loaded.tools);
          host.skipped = strings(loaded.skipped);
          return { process, session };
        },
      }),
    };
    return host;
  }
}

async function stampOf(dir: string): Promise<string> {
  const times = await Promise.all(
    ["index.js", "package.json"].map(
      async (file) => (await lstat(join(dir, file)).catch(() => undefined))?.mtimeMs ?? -1,
    ),
  );
  return times.join(",");
}

function hostedTools(value: unknown): HostedTool[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item) => {
    if (!item || typeof item !== "object") return [];
    const tool = item as Record<string, unknown>;
    if (typeof tool.name !== "string") return [];
    return [
      {
        name: tool.name,
        description: typeof tool.description === "string" ? tool.description : "",
        inputSchema: tool.inputSchema,
      },
    ];
  });
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}
