import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";

/**
 * A process that stays up between calls (a Workbench plugin's host; MCP servers and Osaurus hosts
 * next): started without a shell in its own process group, spoken to over stdin, heard line by
 * line on stdout, its stderr's tail kept for error messages. Killing it ends its whole group (a
 * namespace launcher takes its namespace down with it).
 */
export interface LongLivedSpec {
  command: string;
  args?: readonly string[];
  cwd: string;
  /** The complete environment: nothing is inherited. */
  env: Record<string, string>;
  uid?: number;
  gid?: number;
  /** Descriptors the process inherits beyond stdio, as fds 3, 4, … (a held namespace). */
  extraFds?: readonly number[];
  /** How much of stderr's end is kept (for error messages). Default 64 KB. */
  stderrTailBytes?: number;
  /** A stdout line longer than this is dropped (and counted). Default 8 MB. */
  maxLineBytes?: number;
  /** Not started at all, for this reason (the sandbox could not build its command line). */
  refused?: string;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when it could not be started at all. */
  spawnError?: string;
}

export class LongLivedProcess {
  /** Resolves when the process has exited (or failed to start). */
  readonly exited: Promise<ProcessExit>;
  private readonly lineListeners: ((line: string) => void)[] = [];
  private stderrChunks: Buffer[] = [];
  private stderrBytes = 0;
  private exit: ProcessExit | undefined;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private overlong = false;
  /** Lines dropped for being longer than `maxLineBytes`. */
  droppedLines = 0;
  private readonly child: ChildProcessWithoutNullStreams | undefined;

  constructor(private readonly spec: LongLivedSpec) {
    let resolveExit!: (exit: ProcessExit) => void;
    this.exited = new Promise((resolve) => (resolveExit = resolve));
    const settle = (exit: ProcessExit): void => {
      if (this.exit) return;
      this.exit = exit;
      this.killGroup("SIGKILL");
      resolveExit(exit);
    };
    if (spec.refused !== undefined) {
      this.child = undefined;
      settle({ code: null, signal: null, spawnError: spec.refused });
      return;
    }
    try {
      this.child = spawn(spec.command, spec.args ?? [], {
        cwd: spec.cwd,
        env: spec.env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe", ...(spec.extraFds ?? [])],
        uid: spec.uid,
        gid: spec.gid,
      }) as ChildProcessWithoutNullStreams;
    } catch (error) {
      this.child = undefined;
      settle({ code: null, signal: null, spawnError: (error as Error).message });
      return;
    }
    const child = this.child;
    child.on("error", (error) => {
      if (child.pid === undefined) settle({ code: null, signal: null, spawnError: error.message });
    });
    child.on("exit", (code, signal) => settle({ code, signal }));
    child.stdin.on("error", () => {});
    child.stdout.on("error", () => {});
    child.stderr.on("error", () => {});
    child.stdout.on("data", (chunk: Buffer) => this.take(chunk));
    child.stderr.on("data", (chunk: Buffer) => this.keepStderr(chunk));
  }

  /** The launcher's pid (outside any namespace), while it runs. */
  get pid(): number | undefined {
    return this.exit ? undefined : this.child?.pid;
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** Each complete stdout line (without its newline). */
  onLine(listener: (line: string) => void): void {
    this.lineListeners.push(listener);
  }

  /** Writes to stdin; false when the process is gone. */
  write(text: string): boolean {
    if (!this.running || !this.child || this.child.stdin.destroyed) return false;
    this.child.stdin.write(text);
    return true;
  }

  /** The end of what it wrote to stderr. */
  stderrTail(): string {
    return Buffer.concat(this.stderrChunks).toString("utf8");
  }

  /** SIGKILL to the whole group at once. */
  kill(): void {
    this.killGroup("SIGKILL");
  }

  /** Closes stdin, then SIGTERM after `graceMs`, then SIGKILL after as long again. */
  async stop(graceMs = 2_000): Promise<void> {
    if (!this.running) return;
    this.child?.stdin.end();
    const after = (ms: number) =>
      new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), ms).unref());
    if ((await Promise.race([this.exited, after(graceMs)])) !== "timeout") return;
    this.killGroup("SIGTERM");
    if ((await Promise.race([this.exited, after(graceMs)])) !== "timeout") return;
    this.killGroup("SIGKILL");
    await this.exited;
  }

  private killGroup(signal: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // ESRCH: already gone.
    }
  }

  private take(chunk: Buffer): void {
    const max = this.spec.maxLineBytes ?? 8 * 1024 * 1024;
    let start = 0;
    for (let index = chunk.indexOf(10); index !== -1; index = chunk.indexOf(10, start)) {
      this.append(chunk.subarray(start, index), max);
      const line = Buffer.concat(this.pending).toString("utf8");
      const dropped = this.overlong;
      this.pending = [];
      this.pendingBytes = 0;
      this.overlong = false;
      start = index + 1;
      if (dropped) this.droppedLines++;
      else for (const listener of this.lineListeners) listener(line);
    }
    this.append(chunk.subarray(start), max);
  }

  private append(part: Buffer, max: number): void {
    if (this.overlong || part.length === 0) return;
    if (this.pendingBytes + part.length > max) {
      this.overlong = true;
      this.pending = [];
      this.pendingBytes = 0;
      return;
    }
    this.pending.push(part);
    this.pendingBytes += part.length;
  }

  private keepStderr(chunk: Buffer): void {
    const max = this.spec.stderrTailBytes ?? 64 * 1024;
    this.stderrChunks.push(chunk);
    this.stderrBytes += chunk.length;
    while (this.stderrBytes > max && this.stderrChunks.length > 1) {
      this.stderrBytes -= (this.stderrChunks.shift() as Buffer).length;
    }
    if (this.stderrBytes > max) {
      const only = this.stderrChunks[0] as Buffer;
      this.stderrChunks = [only.subarray(only.length - max)];
      this.stderrBytes = max;
    }
  }
}
