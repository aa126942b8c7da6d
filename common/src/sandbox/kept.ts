import type { Logger } from "../logger.js";
import type { LongLivedProcess } from "./long-lived.js";

/** What `start` made: the process and whatever the caller speaks to it through (a JSON-lines session, a client). */
export interface Started<S> {
  process: LongLivedProcess;
  session: S;
}

export interface KeptProcessOptions<S> {
  /** For logs. */
  name: string;
  logger: Logger;
  /** Starts the process and does its handshake; throws (having killed it) when that fails. */
  start(): Promise<Started<S>>;
  /** First delay before a restart after a crash; doubles per crash in a row, up to `maxRestartDelayMs`. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
  /** A process that lived this long resets the delay. */
  healthyAfterMs?: number;
  /** Told after every start, restarts included (e.g. to read a plugin's tools again). */
  onStart?(session: S): void;
}

/** A call that outlived its time: the process was killed and will be started again. */
export class TimedOutError extends Error {
  override name = "TimedOutError";
}

/**
 * A long-lived process kept running: started on first use, restarted after a crash (with a growing
 * delay, so one that dies at once does not spin), killed when a call outlives its time (then
 * started again on the next use), and stopped for good by `stop`.
 */
export class KeptProcess<S> {
  private current: Started<S> | undefined;
  private starting: Promise<Started<S>> | undefined;
  private stopped = false;
  private crashes = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  /** How many times it was started (tests and the status read it). */
  starts = 0;

  constructor(private readonly options: KeptProcessOptions<S>) {}

  /** The launcher's pid of the running process, if one runs. */
  get pid(): number | undefined {
    return this.current?.process.pid;
  }

  get running(): boolean {
    return this.current?.process.running ?? false;
  }

  /** The running session, starting the process first if none runs. */
  async session(): Promise<S> {
    if (this.stopped) throw new Error(`${this.options.name} is stopped`);
    if (this.current?.process.running) return this.current.session;
    return (await this.launch()).session;
  }

  /**
   * Runs `work` against the session. Past `timeoutMs` the process is killed (every call in flight
   * fails with it) and this call fails with TimedOutError; the next use starts it again.
   */
  async use<T>(work: (session: S) => Promise<T>, timeoutMs: number): Promise<T> {
    const session = await this.session();
    const started = this.current;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.options.logger.warn("a call outlived its time: killing the process", {
          process: this.options.name,
          timeoutMs,
        });
        started?.process.kill();
        reject(new TimedOutError(`timed out after ${Math.round(timeoutMs / 100) / 10} s`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([work(session), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Kills the running process; the next use (or the restart after the crash) starts a new one. */
  kill(): void {
    this.current?.process.kill();
  }

  /** Stops the process for good (stdin closed, then SIGTERM, then SIGKILL). */
  async stop(graceMs = 2_000): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    const current = this.current ?? (await this.starting?.catch(() => undefined));
    this.current = undefined;
    await current?.process.stop(graceMs);
  }

  private launch(): Promise<Started<S>> {
    clearTimeout(this.restartTimer);
    this.starting ??= (async () => {
      try {
        const started = await this.options.start();
        this.starts++;
        if (this.stopped) {
          started.process.kill();
          throw new Error(`${this.options.name} is stopped`);
        }
        this.current = started;
        const since = Date.now();
        void started.process.exited.then((exit) => this.exitedUnexpectedly(started, exit, since));
        this.options.onStart?.(started.session);
        return started;
      } finally {
        this.starting = undefined;
      }
    })();
    return this.starting;
  }

  private exitedUnexpectedly(
    started: Started<S>,
    exit: { code: number | null; signal: NodeJS.Signals | null },
    since: number,
  ): void {
    if (this.current !== started) return;
    this.current = undefined;
    if (this.stopped) return;
    const { logger, name } = this.options;
    if (Date.now() - since >= (this.options.healthyAfterMs ?? 60_000)) this.crashes = 0;
    const base = this.options.restartDelayMs ?? 1_000;
    const delay = Math.min(base * 2 ** this.crashes, this.options.maxRestartDelayMs ?? 60_000);
    this.crashes++;
    logger.warn("a kept process ended; restarting it", {
      process: name,
      code: exit.code,
      signal: exit.signal,
      stderr: started.process.stderrTail().slice(-500),
      delayMs: delay,
    });
    this.restartTimer = setTimeout(() => {
      if (this.stopped || this.current || this.starting) return;
      this.launch().catch((error: unknown) =>
        logger.error("a kept process could not be restarted", { process: name, error: String(error) }),
      );
    }, delay);
    this.restartTimer.unref();
  }
}
