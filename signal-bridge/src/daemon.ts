import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import type { Logger, SignalCliState } from "@stavrobot/common";
import { errorMessage } from "@stavrobot/common";
import { forgetPid, reapOrphan, rememberPid } from "./pidfile.js";

export interface DaemonOptions {
  command: string;
  args: string[];
  /** `http://127.0.0.1:<port>`: polled at `/api/v1/check` until it answers 200. */
  baseUrl: string;
  logger: Logger;
  /** Where the running daemon's pid is kept, so one orphaned by a killed bridge can be stopped. */
  pidFile: string;
  /** Added to this process's environment (signal-cli needs HOME, and JAVA_HOME for the JVM build). */
  env?: Record<string, string>;
  restartBaseMs?: number;
  restartMaxMs?: number;
  /** Running this long before dying resets the restart delay. */
  healthyResetMs?: number;
  /** signal-cli not answering its check by then is killed (and restarted). */
  startupTimeoutMs?: number;
  checkIntervalMs?: number;
  /** Between SIGTERM and SIGKILL when stopping. */
  killGraceMs?: number;
}

/**
 * Supervises `signal-cli daemon`: starts it, waits for `/api/v1/check`, and restarts it whenever
 * it dies (1 s, doubling to 60 s; back to 1 s once it had run healthily for a minute). It runs in
 * its own process group so stopping it also stops whatever it started. Not `runProcess` (common),
 * which runs a program to completion under a timeout: this one should run forever.
 *
 * Its stdout is not read: in daemon mode signal-cli prints every received message there, which
 * the bridge takes from the event stream instead and keeps out of the logs.
 */
export class SignalCliDaemon {
  private current: ChildProcess | undefined;
  private stateValue: SignalCliState = "down";
  private stopped = true;
  private delay: number;
  private runningSince: number | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private waiters: (() => void)[] = [];
  /** Pid-file writes, in order, so a quick exit never leaves the file naming a dead process. */
  private pidWrites: Promise<void> = Promise.resolve();
  private readonly log: Logger;

  constructor(private readonly options: DaemonOptions) {
    this.delay = options.restartBaseMs ?? 1_000;
    this.log = options.logger;
  }

  get state(): SignalCliState {
    return this.stateValue;
  }

  /** The pid of the signal-cli process now running, if any. */
  get pid(): number | undefined {
    return this.current?.pid;
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await reapOrphan(this.options.pidFile, this.log);
    this.launch();
  }

  /** Resolves once signal-cli answers its health check (at once if it does now). */
  whenRunning(signal?: AbortSignal): Promise<void> {
    if (this.stateValue === "running") return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        signal?.removeEventListener("abort", done);
        this.waiters = this.waiters.filter((waiter) => waiter !== done);
        resolve();
      };
      this.waiters.push(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Stops signal-cli (SIGTERM to its group, SIGKILL after the grace time) and does not restart it. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const child = this.current;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      killGroup(child, "SIGTERM");
      const killer = setTimeout(() => killGroup(child, "SIGKILL"), this.options.killGraceMs ?? 3_000);
      await exited;
      clearTimeout(killer);
    }
    await this.pidWrites;
    this.setState("down");
  }

  private launch(): void {
    if (this.stopped) return;
    this.setState("starting");
    this.runningSince = undefined;
    const child = spawn(this.options.command, this.options.args, {
      env: { ...process.env, ...this.options.env },
      stdio: ["ignore", "ignore", "pipe"],
      detached: true,
    });
    this.current = child;
    let ended = false;
    const finish = (reason: Record<string, unknown>): void => {
      if (ended) return;
      ended = true;
      this.pidWrites = this.pidWrites.then(() => forgetPid(this.options.pidFile, child.pid));
      this.exited(child, reason);
    };
    // A spawn failure (ENOENT: SIGNAL_CLI_PATH is wrong) arrives as "error" with no "exit".
    child.once("error", (error) => finish({ error: errorMessage(error) }));
    child.once("exit", (code, signal) => finish({ code, signal }));
    if (child.pid === undefined) return;
    const pid = child.pid;
    this.pidWrites = this.pidWrites.then(() => rememberPid(this.options.pidFile, pid));
    this.log.info("signal-cli started", { pid: child.pid });
    if (child.stderr) {
      createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", (line) => this.relay(line));
    }
    void this.waitUntilReady(child);
  }

  private async waitUntilReady(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + (this.options.startupTimeoutMs ?? 120_000);
    while (this.current === child && !this.stopped && child.exitCode === null) {
      if (await this.check()) {
        if (this.current !== child || child.exitCode !== null) return;
        this.runningSince = Date.now();
        this.log.info("signal-cli is ready", { pid: child.pid });
        this.setState("running");
        return;
      }
      if (Date.now() > deadline) {
        this.log.error("signal-cli did not become ready in time; killing it", { pid: child.pid });
        killGroup(child, "SIGKILL");
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, this.options.checkIntervalMs ?? 250));
    }
  }

  private async check(): Promise<boolean> {
    try {
      const response = await fetch(`${this.options.baseUrl}/api/v1/check`, {
        signal: AbortSignal.timeout(2_000),
      });
      await response.arrayBuffer();
      return response.status === 200;
    } catch {
      return false;
    }
  }

  private exited(child: ChildProcess, reason: Record<string, unknown>): void {
    if (this.current !== child) return;
    this.current = undefined;
    // Whatever it left behind in its group goes with it.
    killGroup(child, "SIGKILL");
    if (this.stopped) return;
    const base = this.options.restartBaseMs ?? 1_000;
    const healthyFor = this.runningSince === undefined ? 0 : Date.now() - this.runningSince;
    if (healthyFor >= (this.options.healthyResetMs ?? 60_000)) this.delay = base;
    this.setState("down");
    this.log.error("signal-cli exited; restarting", { ...reason, inMs: this.delay });
    this.restartTimer = setTimeout(() => this.launch(), this.delay);
    this.delay = Math.min(this.delay * 2, this.options.restartMaxMs ?? 60_000);
  }

  private setState(state: SignalCliState): void {
    this.stateValue = state;
    if (state !== "running") return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  /** signal-cli's own log lines (stderr), at their level. */
  private relay(line: string): void {
    const text = line.trim().slice(0, 2_000);
    if (text === "") return;
    if (/^ERROR\b/.test(text)) this.log.error(`signal-cli: ${text}`);
    else if (/^WARN\b/.test(text)) this.log.warn(`signal-cli: ${text}`);
    else if (/^DEBUG\b/.test(text)) this.log.debug(`signal-cli: ${text}`);
    else this.log.info(`signal-cli: ${text}`);
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: the group is gone already.
  }
}
