import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import type { Readable } from "node:stream";

export interface ProcessSpec {
  command: string;
  args?: readonly string[];
  cwd: string;
  /** The complete environment: nothing is inherited from the runner. */
  env: Record<string, string>;
  stdin?: string | Buffer;
  timeoutMs: number;
  /** Drop to this user and group (only meaningful when the runner is root). */
  uid?: number;
  gid?: number;
  stdoutLimitBytes: number;
  stderrLimitBytes: number;
  /** Between SIGTERM and SIGKILL on timeout. */
  killGraceMs?: number;
  /** Descriptors of this process the program gets as 3, 4, ... (a namespace for bubblewrap). */
  extraFds?: readonly number[];
}

export interface ProcessResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  timedOut: boolean;
  /** Set when the process could not be started at all (missing file, not executable, ...). */
  spawnError?: string;
  durationMs: number;
}

/** After the main process exits, how long stragglers outside its group may hold our pipes open. */
const PIPE_DRAIN_MS = 1_000;

/**
 * Runs one program without a shell, as its own process group, and always settles: on timeout the
 * whole group gets SIGTERM, then SIGKILL; when the program exits, whatever it left behind in its
 * group is killed. Output beyond the caps is read and thrown away, so a chatty program can
 * neither block on a full pipe nor grow the runner's memory.
 */
export function runProcess(spec: ProcessSpec): Promise<ProcessResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    let child: ChildProcessWithoutNullStreams;
    try {
      // Standard input, output and error are pipes whatever follows them.
      child = spawn(spec.command, spec.args ?? [], {
        cwd: spec.cwd,
        env: spec.env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe", ...(spec.extraFds ?? [])],
        uid: spec.uid,
        gid: spec.gid,
      }) as ChildProcessWithoutNullStreams;
    } catch (error) {
      resolve(failedToStart(error, started));
      return;
    }
    const pid = child.pid;
    const stdout = capture(child.stdout, spec.stdoutLimitBytes);
    const stderr = capture(child.stderr, spec.stderrLimitBytes);
    let timedOut = false;
    let settled = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    const timers: NodeJS.Timeout[] = [];

    const killGroup = (signal: NodeJS.Signals): void => {
      if (pid === undefined) return;
      try {
        process.kill(-pid, signal);
      } catch {
        // ESRCH: the group is already gone.
      }
    };
    const finish = (result: ProcessResult): void => {
      if (settled) return;
      settled = true;
      for (const timer of timers) clearTimeout(timer);
      resolve(result);
    };

    timers.push(
      setTimeout(() => {
        timedOut = true;
        killGroup("SIGTERM");
        timers.push(setTimeout(() => killGroup("SIGKILL"), spec.killGraceMs ?? 2_000));
      }, spec.timeoutMs),
    );

    child.on("error", (error) => {
      // Spawn failures (ENOENT, EACCES) arrive here and no "exit" follows.
      if (exit === undefined) finish(failedToStart(error, started));
    });
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      killGroup("SIGKILL");
      // A process that left the group (setsid) may still hold the pipes: stop waiting for it.
      timers.push(
        setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
          child.emit("close", code, signal);
        }, PIPE_DRAIN_MS),
      );
    });
    child.on("close", () => {
      if (exit === undefined) return;
      finish({
        exitCode: exit.code,
        signal: exit.signal,
        stdout: stdout.text(),
        stderr: stderr.text(),
        stdoutTruncated: stdout.truncated(),
        stderrTruncated: stderr.truncated(),
        timedOut,
        durationMs: Date.now() - started,
      });
    });

    // A program that never reads stdin makes the write fail with EPIPE; that is not an error.
    child.stdin.on("error", () => {});
    child.stdin.end(spec.stdin ?? "");
  });
}

function capture(stream: Readable, limit: number): { text(): string; truncated(): boolean } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = false;
  stream.on("data", (chunk: Buffer) => {
    if (kept >= limit) {
      dropped = true;
      return;
    }
    const room = limit - kept;
    if (chunk.length > room) {
      chunks.push(chunk.subarray(0, room));
      kept = limit;
      dropped = true;
    } else {
      chunks.push(chunk);
      kept += chunk.length;
    }
  });
  stream.on("error", () => {});
  return { text: () => Buffer.concat(chunks).toString("utf8"), truncated: () => dropped };
}

function failedToStart(error: unknown, started: number): ProcessResult {
  return {
    exitCode: null,
    signal: null,
    stdout: "",
    stderr: "",
    stdoutTruncated: false,
    stderrTruncated: false,
    timedOut: false,
    spawnError: error instanceof Error ? error.message : String(error),
    durationMs: Date.now() - started,
  };
}
