import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ProcessGoneError, TimedOutError, errorMessage, writeFileAtomic } from "@stavrobot/common";
import type { JsonLines, KeptProcess } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import { HOST_SCRIPTS_DIR } from "../host-scripts.js";
import type { RunOutcome } from "../chat-messages.js";

/** What every plugin host is: its kept process and the stamp of the files it loaded. */
export interface KeptHost {
  kept: KeptProcess<JsonLines>;
  stamp: string;
}

/** How long a plugin that failed to load is not tried again while its files stay the same. */
const RETRY_FAILED_MS = 60_000;
/** How long loading a plugin in its host (its `register(api)`, or its library's entry point) may take. */
const LOAD_TIMEOUT_MS = 30_000;
/** The host scripts' texts, each read once. */
const scripts = new Map<string, string>();

/**
 * Puts a fresh copy of the runner's host script `name` in the plugin's cache directory, at every
 * start. The directory is the plugin's: whatever it left at that path (a symlink to a file of the
 * machine) is replaced by a rename, never written through.
 */
export async function placeHostScript(cacheDir: string, name: string): Promise<void> {
  let text = scripts.get(name);
  if (text === undefined) {
    text = await readFile(join(HOST_SCRIPTS_DIR, name), "utf8");
    scripts.set(name, text);
  }
  await writeFileAtomic(join(cacheDir, name), text, undefined, 0o644);
}

/**
 * A host's answer to its `load` request. A refusal, an answer that does not come within
 * LOAD_TIMEOUT_MS or a host that dies meanwhile kills the host and throws "`what` could not be
 * loaded: …".
 */
export async function loadInHost(
  session: JsonLines,
  request: Record<string, unknown>,
  what: string,
): Promise<Record<string, unknown>> {
  const timer = setTimeout(() => session.process.kill(), LOAD_TIMEOUT_MS);
  try {
    const loaded = await session.request(request);
    if (loaded.ok !== true) throw new Error(String(loaded.error ?? "it did not load"));
    return loaded;
  } catch (error) {
    session.process.kill();
    throw new Error(`${what} could not be loaded: ${errorMessage(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One kept host process per plugin, by name (the Workbench and Osaurus formats): started when the
 * plugin is first read, started again when its files change, not tried again for a minute after it
 * failed to load the same files, and stopped when the plugin is updated or removed.
 */
export abstract class KeptHosts<H extends KeptHost> {
  private readonly hosts = new Map<string, H>();
  private readonly failures = new Map<string, { stamp: string; error: Error; at: number }>();

  /** `stopGraceMs`: how long a host may take to leave by itself once its input is closed. */
  constructor(private readonly stopGraceMs: number) {}

  /** The plugin's host once it has loaded: started, or started again if `stamp` changed. */
  protected async loaded(plugin: string, stamp: string, create: () => H): Promise<H> {
    let host = this.hosts.get(plugin);
    if (host && host.stamp !== stamp) {
      await this.stop(plugin);
      host = undefined;
    }
    const failed = this.failures.get(plugin);
    if (!host && failed?.stamp === stamp && Date.now() - failed.at < RETRY_FAILED_MS) throw failed.error;
    host ??= this.keep(plugin, create());
    try {
      await host.kept.session();
    } catch (error) {
      // Every listing would otherwise start a process to fail again.
      await this.stop(plugin);
      this.failures.set(plugin, { stamp, error: error as Error, at: Date.now() });
      throw error;
    }
    this.failures.delete(plugin);
    return host;
  }

  /**
   * The plugin's host for a call: the running one, or a new one. A host starts its process only
   * when first used, so one made while another call made one too is dropped unused.
   */
  protected async forCall(plugin: string, create: () => Promise<H>): Promise<H> {
    const running = this.hosts.get(plugin);
    if (running) return running;
    const made = await create();
    return this.hosts.get(plugin) ?? this.keep(plugin, made);
  }

  private keep(plugin: string, host: H): H {
    this.hosts.set(plugin, host);
    return host;
  }

  async stop(plugin: string): Promise<void> {
    this.failures.delete(plugin);
    const host = this.hosts.get(plugin);
    this.hosts.delete(plugin);
    // Input closed first: the host script ends the plugin its own way and leaves.
    await host?.kept.stop(this.stopGraceMs);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.hosts.keys()].map((plugin) => this.stop(plugin)));
  }

  /** The launcher's pid of a plugin's host while it runs (tests and diagnostics). */
  pidOf(plugin: string): number | undefined {
    return this.hosts.get(plugin)?.kept.pid;
  }
}

/**
 * A request to a host within `timeoutMs`: its answer, or the failure the model is told when there
 * was none. Past the time the host is killed and started again; a host that died during the call
 * (`ended` says how) or could not start is started again at the next call.
 */
export async function requestHost(
  host: KeptHost,
  message: Record<string, unknown>,
  timeoutMs: number,
  executor: Executor,
  ended: (error: ProcessGoneError) => string,
): Promise<{ answer: Record<string, unknown> } | { failed: RunOutcome }> {
  try {
    return { answer: await host.kept.use((session) => session.request(message), timeoutMs) };
  } catch (error) {
    if (error instanceof TimedOutError) {
      const seconds = Math.round(timeoutMs / 100) / 10;
      return {
        failed: {
          success: false,
          error: `Tool execution timed out after ${seconds} s: the plugin's process was stopped and is being started again.`,
        },
      };
    }
    const words =
      error instanceof ProcessGoneError
        ? ended(error)
        : `The plugin could not be started: ${errorMessage(error)}`;
    return { failed: { success: false, error: executor.tidy(words) } };
  }
}
