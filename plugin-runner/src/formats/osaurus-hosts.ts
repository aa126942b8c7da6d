import { cp, lstat, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { JsonLines, KeptProcess } from "@stavrobot/common";
import type { Logger, Mount } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { RunOutcome } from "../chat-messages.js";
import type { Plugin } from "./format.js";
import { KeptHosts, loadInHost, placeHostScript, requestHost, type KeptHost } from "./kept-hosts.js";

interface Host extends KeptHost {
  /** What get_manifest answered when the library was loaded. */
  manifest: string;
  abi: number;
}

/** What a host needs to load a plugin: its directory and its library, relative to it. */
export interface OsaurusTarget {
  plugin: Pick<Plugin, "name" | "dir" | "network">;
  library: string;
  /** The secrets the owner set (the plugin's `config_get` reads them). */
  secrets: () => Promise<Record<string, string>>;
}

const HOST_SCRIPT = "osaurus-host.cjs";
/** The plugin's own settings (`config_set`), in its data directory. */
export const SETTINGS_FILE = "osaurus-settings.json";

/**
 * A copy of koffi and its prebuilt binaries in `cache/node_modules` (kept while its version is
 * the runner's): the path the host loads it from when the plugin runs as its own user without a
 * sandbox to mount it in.
 */
async function copyKoffi(dirs: { koffi: string; prebuilt: string }, cache: string): Promise<string> {
  const target = join(cache, "node_modules");
  const version = await readFile(join(dirs.koffi, "package.json"), "utf8");
  const copied = await readFile(join(target, "koffi", "package.json"), "utf8").catch(() => undefined);
  if (copied !== version) {
    await rm(target, { recursive: true, force: true });
    await cp(dirs.koffi, join(target, "koffi"), { recursive: true });
    await cp(dirs.prebuilt, join(target, "@koromix"), { recursive: true });
  }
  return join(target, "koffi");
}

/** koffi's package and its prebuilt binaries (`@koromix/…`), beside it in node_modules. */
function koffiDirs(): { koffi: string; prebuilt: string } {
  const koffi = dirname(createRequire(import.meta.url).resolve("koffi"));
  return { koffi, prebuilt: join(dirname(koffi), "@koromix") };
}

/**
 * One kept Node process per Osaurus plugin, each the host script in the plugin's sandbox with the
 * plugin's library loaded through koffi: started when the plugin is first read (the manifest is
 * what `get_manifest` answered), killed at a call's time limit, restarted after a crash (a segfault
 * or abort ends that process only), started again when the library changes, and stopped (the
 * library's `destroy` called) when the plugin is updated or removed.
 */
export class OsaurusHosts extends KeptHosts<Host> {
  constructor(
    private readonly executor: Executor,
    private readonly logger: Logger,
  ) {
    // stdin closed first: the host calls the library's destroy() and leaves.
    super(1_000);
  }

  /** The library's manifest, from its running host (started, or restarted if the library changed). */
  async manifest(target: OsaurusTarget): Promise<{ manifest: string; abi: number }> {
    const stamp = await stampOf(target);
    const host = await this.loaded(target.plugin.name, stamp, () => this.create(target, stamp));
    return { manifest: host.manifest, abi: host.abi };
  }

  /**
   * `invoke(ctx, "tool", id, payload)` in the plugin's host. Past `timeoutMs` the host is killed and
   * started again; a host that dies during the call answers an error, and is started again.
   */
  async invoke(
    target: OsaurusTarget,
    tool: string,
    payload: string,
    secrets: Record<string, string>,
    timeoutMs: number,
  ): Promise<RunOutcome> {
    const host = await this.forCall(target.plugin.name, async () =>
      this.create(target, await stampOf(target)),
    );
    const called = await requestHost(
      host,
      { op: "invoke", tool, payload, secrets },
      timeoutMs,
      this.executor,
      (error) =>
        `The plugin's process ended while the tool ran (it crashed); it is being started again. ${signalled(error.message)}`,
    );
    if ("failed" in called) return called.failed;
    const { answer } = called;
    if (answer.ok !== true) {
      return { success: false, error: typeof answer.error === "string" ? answer.error : "unknown error" };
    }
    if (typeof answer.result !== "string") return { success: false, error: "Plugin returned NULL response" };
    return resultOutcome(answer.result);
  }

  private create(target: OsaurusTarget, stamp: string): Host {
    const { executor, logger } = this;
    const { plugin } = target;
    const host: Host = {
      stamp,
      manifest: "",
      abi: 0,
      kept: new KeptProcess<JsonLines>({
        name: `osaurus:${plugin.name}`,
        logger,
        start: async () => {
          const prepared = await executor.prepareForRun(plugin.dir, plugin.name);
          await placeHostScript(prepared.cache, HOST_SCRIPT);
          const secrets = await target.secrets();
          const paths = executor.pluginPaths(plugin, prepared, undefined);
          const dirs = koffiDirs();
          // Read-only, at their own paths (koffi finds its binaries beside itself). Without
          // namespaces the plugin's user may not reach the runner's node_modules at all (a
          // private install directory): koffi is copied into the plugin's cache, which it reads.
          const mounts: Mount[] = executor.namespaces
            ? [
                { source: dirs.koffi, target: dirs.koffi },
                { source: dirs.prebuilt, target: dirs.prebuilt },
              ]
            : [];
          const koffiPath = executor.namespaces ? dirs.koffi : await copyKoffi(dirs, prepared.cache);
          const process = executor.startKept(
            prepared,
            { ...paths, mounts: [...paths.mounts, ...mounts] },
            {
              command: "node",
              args: [`${paths.cacheRoot}/${HOST_SCRIPT}`],
              cwd: paths.pluginRoot,
              env: { OSAURUS_KOFFI: koffiPath },
            },
          );
          const session = new JsonLines(process);
          session.onMessage((message) => {
            if (message.event !== "log") return;
            logger.info("plugin log", {
              plugin: plugin.name,
              level: message.level,
              message: String(message.message).slice(0, 2_000),
            });
          });
          const loaded = await loadInHost(
            session,
            {
              op: "load",
              library: paths.toSandbox(join(plugin.dir, target.library)),
              settingsFile: `${paths.dataRoot}/${SETTINGS_FILE}`,
              secrets,
            },
            "the library",
          );
          host.manifest = typeof loaded.manifest === "string" ? loaded.manifest : "";
          host.abi = typeof loaded.abi === "number" ? loaded.abi : 1;
          return { process, session };
        },
      }),
    };
    return host;
  }
}

/** The answer as the model sees it (the string unchanged); `ok:false` or a top-level `error` fail. */
export function resultOutcome(result: string): RunOutcome {
  let parsed: unknown;
  try {
    parsed = JSON.parse(result);
  } catch {
    return { success: true, output: result };
  }
  if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
    const record = parsed as Record<string, unknown>;
    if (record.ok === false || (record.error !== undefined && record.error !== null))
      return { success: false, error: result };
  }
  return { success: true, output: result };
}

/** A sandbox's launcher reports a signal as exit code 128 + n: name it, as a direct child's would be. */
function signalled(message: string): string {
  return message.replace(/exited with code (\d+)/, (text, code: string) => {
    const number = Number(code) - 128;
    const name = Object.entries(constants.signals).find(([, value]) => value === number)?.[0];
    return number > 0 && name ? `was killed by ${name}` : text;
  });
}

async function stampOf(target: OsaurusTarget): Promise<string> {
  const info = await lstat(join(target.plugin.dir, target.library)).catch(() => undefined);
  return `${info?.mtimeMs ?? -1},${info?.size ?? -1}`;
}
