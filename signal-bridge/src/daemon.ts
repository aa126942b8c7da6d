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

/** How long signal-cli may take to answer its check by default (a JVM on a small machine is slow). */
const STARTUP_TIMEOUT_MS = 120_000;

/**
 * Supervises `signal-cli daemon`: starts it, waits for `/api/v1/check`, and restarts it whenever
 * it dies (1 s, doubling to 60 s; back to 1 s once it had run healthily for a minute). It runs in
 * its own process group so stopping it also stops whatever it started. Not `runProcess` (common),
 * which runs a program to completion under a timeout: this one should run forever.
 *
 * Its stdout is not read: in daemon mode signal-cli prints every received message there, which
 * the bridge takes from the event stream instead and keeps out of the logs.
 *
 * While it does not run, `problem` says why in a sentence that says what to do (the bridge's
 * `/health` and its 503s carry it). A signal-cli that is not installed (`spawn … ENOENT`) is
 * `missing`: said once in the log with what to install or configure, then looked for again
 * quietly (debug) at the restart delay, and announced when found.
 */
export class SignalCliDaemon {
  private current: ChildProcess | undefined;
  private stateValue: SignalCliState = "down";
  private problemValue = "signal-cli is not running";
  /** How the last signal-cli exited ("exit code 1"), until the next one starts. */
  private exitHow: string | undefined;
  /** The last error or warning signal-cli wrote on stderr (why it stopped, most often). */
  private lastComplaint: string | undefined;
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

  /** Why signal-cli does not run (and what to do), while it does not. */
  get problem(): string | undefined {
    if (this.stateValue === "running") return undefined;
    // Composed when asked: its stderr's last lines may come in after it exited.
    if (this.exitHow !== undefined) {
      const complaint = this.lastComplaint ? `: ${this.lastComplaint}` : "";
      return `signal-cli stopped (${this.exitHow})${complaint}; the bridge restarts it (its log says more)`;
    }
    return this.problemValue;
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
    this.runningSince = undefined;
    this.lastComplaint = undefined;
    const child = spawn(this.options.command, this.options.args, {
      env: { ...process.env, ...this.options.env },
      stdio: ["ignore", "ignore", "pipe"],
      detached: true,
    });
    this.current = child;
    let ended = false;
    const finish = (reason: ExitReason): void => {
      if (ended) return;
      ended = true;
      this.pidWrites = this.pidWrites.then(() => forgetPid(this.options.pidFile, child.pid));
      this.exited(child, reason);
    };
    // A spawn failure (ENOENT: SIGNAL_CLI_PATH is wrong) arrives as "error" with no "exit"; an
    // error of a running one (a failed kill) is followed by its "exit".
    child.on("error", (error) => {
      if (child.pid === undefined) finish({ error });
      else this.log.warn("signal-cli process error", { pid: child.pid, error: errorMessage(error) });
    });
    child.once("exit", (code, signal) => finish({ code, signal }));
    // Not started (no pid): its "error" follows, and the state stays what it was (`missing`).
    if (child.pid === undefined) return;
    if (this.stateValue === "missing") {
      this.log.info("signal-cli found; starting it", { path: this.options.command });
    }
    this.setState("starting");
    this.problemValue = "signal-cli is starting";
    this.exitHow = undefined;
    const pid = child.pid;
    this.pidWrites = this.pidWrites.then(() => rememberPid(this.options.pidFile, pid));
    this.log.info("signal-cli started", { pid: child.pid });
    if (child.stderr) {
      createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", (line) => this.relay(line));
    }
    void this.waitUntilReady(child);
  }

  private async waitUntilReady(child: ChildProcess): Promise<void> {
    const timeoutMs = this.options.startupTimeoutMs ?? STARTUP_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
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
        this.lastComplaint = `it did not answer within ${Math.round(timeoutMs / 1000)} s`;
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

  private exited(child: ChildProcess, reason: ExitReason): void {
    if (this.current !== child) return;
    this.current = undefined;
    // Whatever it left behind in its group goes with it.
    killGroup(child, "SIGKILL");
    if (this.stopped) return;
    const base = this.options.restartBaseMs ?? 1_000;
    const healthyFor = this.runningSince === undefined ? 0 : Date.now() - this.runningSince;
    if (healthyFor >= (this.options.healthyResetMs ?? 60_000)) this.delay = base;
    const inMs = this.delay;
    this.restartTimer = setTimeout(() => this.launch(), inMs);
    this.delay = Math.min(this.delay * 2, this.options.restartMaxMs ?? 60_000);
    if ("error" in reason) {
      this.notStarted(reason.error, inMs);
      return;
    }
    this.setState("down");
    this.exitHow = reason.signal ? `killed by ${reason.signal}` : `exit code ${reason.code}`;
    this.log.error("signal-cli exited; restarting", { code: reason.code, signal: reason.signal, inMs });
  }

  /**
   * signal-cli could not be started at all. Not installed (ENOENT) is said once, at error level,
   * with what to do; each later attempt that fails the same way is logged at debug only.
   */
  private notStarted(error: Error, inMs: number): void {
    const path = this.options.command;
    const code = (error as NodeJS.ErrnoException).code;
    const problem =
      code === "ENOENT"
        ? `signal-cli is not installed: "${path}" was not found (${errorMessage(error)}). ` +
          "Install signal-cli (see signal-bridge/README.md) or set SIGNAL_CLI_PATH to where it is"
        : `signal-cli could not be started from "${path}" (${errorMessage(error)}). ` +
          "Check that SIGNAL_CLI_PATH names the signal-cli program and that it may be run (see signal-bridge/README.md)";
    const again = problem === this.problemValue && this.exitHow === undefined;
    this.setState(code === "ENOENT" ? "missing" : "down");
    this.problemValue = problem;
    this.exitHow = undefined;
    if (again) {
      this.log.debug("signal-cli still cannot be started; trying again", {
        error: errorMessage(error),
        inMs,
      });
      return;
    }
    this.log.error(
      `${problem}. The bridge sends and receives nothing until then; it keeps trying (at most a minute apart) and says when it finds it.`,
      { error: errorMessage(error) },
    );
  }

  private setState(state: SignalCliState): void {
    this.stateValue = state;
    if (state !== "running") return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter();
  }

  /** signal-cli's own log lines (stderr), at their level; its last complaint is kept for `problem`. */
  private relay(line: string): void {
    const text = line.trim().slice(0, 2_000);
    if (text === "") return;
    if (/^(ERROR|WARN)\b/.test(text)) this.lastComplaint = text.slice(0, 500);
    if (/^ERROR\b/.test(text)) this.log.error(`signal-cli: ${text}`);
    else if (/^WARN\b/.test(text)) this.log.warn(`signal-cli: ${text}`);
    else if (/^DEBUG\b/.test(text)) this.log.debug(`signal-cli: ${text}`);
    else this.log.info(`signal-cli: ${text}`);
  }
}

/** How a signal-cli process ended: it could not be started (`error`), or it exited. */
type ExitReason = { error: Error } | { code: number | null; signal: NodeJS.Signals | null };

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // ESRCH: the group is gone already.
  }
}
