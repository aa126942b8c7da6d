import { ProcessGoneError, TimedOutError, errorMessage } from "@stavrobot/common";
import type { JsonLines, KeptProcess } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { RunOutcome } from "../chat-messages.js";

/** What every plugin host is: its kept process and the stamp of the files it loaded. */
export interface KeptHost {
  kept: KeptProcess<JsonLines>;
  stamp: string;
}

/** How long a plugin that failed to load is not tried again while its files stay the same. */
const RETRY_FAILED_MS = 60_000;

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
