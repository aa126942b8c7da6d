import type { Logger } from "../logger.js";
import { bwrapArgs } from "./bwrap.js";
import type { Launcher } from "./launchers.js";
import { choose, helper } from "./launchers.js";
import type { Mount, SystemEntry } from "./mounts.js";
import { systemEntries } from "./mounts.js";
import type { ProcessResult, ProcessSpec } from "./process.js";
import { runProcess } from "./process.js";
import type { LongLivedSpec } from "./long-lived.js";
import { LongLivedProcess } from "./long-lived.js";
import { unshareArgs } from "./unshare.js";

export type { Mount } from "./mounts.js";
export { SYSTEM_TOOL_PATH, isSystemPath, runtimeMounts, which } from "./mounts.js";

/**
 * The one way any service starts an untrusted process (a plugin tool, a Python script, the coding
 * agent): as a given user, with only the mounts it needs, resource limits, a timeout that ends the
 * whole process tree, and capped output.
 *
 * Two modes, chosen once at start-up:
 * - "namespaces": the process gets its own mount, PID, IPC and UTS namespaces (and, on request, an
 *   empty network namespace). Only the system directories, the runtimes and the mounts a caller
 *   lists exist in it; `/tmp` is private. When the sandbox's first process exits, the kernel ends
 *   everything else in it, so nothing a tool starts can outlive its run. Made by bubblewrap; where
 *   root may not make namespaces (a container without CAP_SYS_ADMIN), by bubblewrap inside a user
 *   namespace of the service's own (`userns.ts`); else, where bubblewrap is missing or refused and
 *   the service is root, by util-linux `unshare`.
 * - "plain": neither can create namespaces here (a container without the right capabilities, or
 *   no bubblewrap and not root). The process runs directly, as the given user, in its own process
 *   group, with the same limits and timeouts; callers must not rely on private mounts or network
 *   removal.
 */
export type SandboxMode = "namespaces" | "plain";

/** What makes the namespaces. */
export type SandboxTool = "bubblewrap" | "unshare";

export interface ResourceLimits {
  /** RLIMIT_NPROC: processes of the run's user (only applied when the run switches user). */
  processes?: number;
  /** RLIMIT_AS: address space in bytes (breaks runtimes that reserve much virtual memory). */
  memoryBytes?: number;
  /** RLIMIT_FSIZE: the largest file the process may write. */
  fileSizeBytes?: number;
  /** RLIMIT_NOFILE. */
  openFiles?: number;
  /** RLIMIT_CPU: seconds of CPU time. */
  cpuSeconds?: number;
}

export interface SandboxRun extends Omit<ProcessSpec, "uid" | "gid"> {
  /** Run as this user. Honoured only when the service is root; otherwise the run keeps its user. */
  user?: { uid: number; gid: number };
  /** Bind mounts (namespaces mode). In plain mode paths are the machine's own, so mounts are ignored. */
  mounts?: readonly Mount[];
  /** False removes the network (namespaces mode only; see `enforcesNetworkRemoval`). Default true. */
  network?: boolean;
  limits?: ResourceLimits;
}

/** A long-lived process in the sandbox: as a run, without stdin, timeout or output caps of its own. */
export interface SandboxStart extends Omit<LongLivedSpec, "uid" | "gid"> {
  user?: { uid: number; gid: number };
  mounts?: readonly Mount[];
  network?: boolean;
  limits?: ResourceLimits;
}

export interface SandboxStatus {
  mode: SandboxMode;
  /** Namespaces mode: the program that makes them. */
  tool?: SandboxTool;
  /** Whether runs can switch to another user (the service is root). */
  users: boolean;
  /** Why bubblewrap is not used (plain mode, or namespaces made by `unshare`). */
  reason?: string;
  /** What this sandbox does not protect, in words for the owner. */
  unprotected: string[];
}

export interface SandboxOptions {
  logger: Logger;
  /** Force plain mode (tests, or an operator who knows the namespaces cannot work). */
  disableNamespaces?: boolean;
  /** Where to look for bwrap, unshare and the other helpers; default this process's PATH. */
  path?: string;
  /**
   * Skip bubblewrap's direct try and use it in a user namespace of the service's own, as in a
   * container (tests of that launcher on a machine where the direct one works).
   */
  userNamespaceOnly?: boolean;
}

export class Sandbox {
  private constructor(
    readonly status: SandboxStatus,
    private readonly launcher: Launcher,
    private readonly helpers: { setpriv?: string | undefined; prlimit?: string | undefined },
    private readonly system: readonly SystemEntry[],
  ) {}

  /**
   * Finds the helpers and checks, by running one real sandbox, that namespaces work here:
   * bubblewrap first, then (as root) util-linux `unshare`, else plain mode. Logs which is in force
   * and what it does not protect.
   */
  static create(options: SandboxOptions): Sandbox {
    const users = process.getuid?.() === 0;
    const path = options.path ?? process.env.PATH ?? "/usr/bin:/bin";
    const helpers = { setpriv: helper("setpriv", path), prlimit: helper("prlimit", path) };
    const system = systemEntries();
    const chosen = choose(options, users, path, helpers, system);
    const status: SandboxStatus = {
      mode: chosen.launcher.tool === "none" ? "plain" : "namespaces",
      ...(chosen.launcher.tool !== "none" ? { tool: chosen.launcher.tool } : {}),
      users,
      ...(chosen.reason ? { reason: chosen.reason } : {}),
      unprotected: unprotected(chosen.launcher, users),
    };
    describe(status, options.logger);
    return new Sandbox(status, chosen.launcher, helpers, system);
  }

  get mode(): SandboxMode {
    return this.status.mode;
  }

  /** Whether `network: false` really removes the network (namespaces mode). */
  get enforcesNetworkRemoval(): boolean {
    return this.status.mode === "namespaces";
  }

  run(spec: SandboxRun): Promise<ProcessResult> {
    const { user, mounts, network, limits, command, args, ...rest } = spec;
    const launch = this.launch({ user, mounts, network, limits, command, args, cwd: spec.cwd });
    if ("error" in launch) return Promise.resolve(refused(launch.error));
    const { namespaced, ...line } = launch;
    const result = runProcess({ ...rest, ...line });
    return namespaced ? result.then(fromSignalExit) : result;
  }

  /**
   * Starts a process that stays up (see `LongLivedProcess`), isolated exactly as `run` isolates
   * one: the same user, mounts, network and limits. It has no timeout of its own: callers bound
   * each exchange (`KeptProcess.use`) and kill it when one outlives its time.
   */
  start(spec: SandboxStart): LongLivedProcess {
    const { user, mounts, network, limits, command, args, ...rest } = spec;
    const launch = this.launch({ user, mounts, network, limits, command, args, cwd: spec.cwd });
    if ("error" in launch) {
      return new LongLivedProcess({ ...rest, command, refused: launch.error });
    }
    const { namespaced: _namespaced, ...line } = launch;
    return new LongLivedProcess({ ...rest, ...line });
  }

  /** The command line that runs `command` in this sandbox, as `spec.user` (when the service is root). */
  private launch(
    spec: Pick<SandboxRun, "user" | "mounts" | "network" | "limits" | "command" | "args" | "cwd">,
  ):
    | {
        command: string;
        args: string[];
        cwd: string;
        uid?: number;
        gid?: number;
        extraFds?: readonly number[];
        namespaced: boolean;
      }
    | { error: string } {
    const { user, mounts, network, limits, command, args } = spec;
    const switchUser = this.status.users && user !== undefined;
    const inner = [...this.limitArgs(limits, switchUser), command, ...(args ?? [])];
    const launcher = this.launcher;
    if (launcher.tool === "none") {
      return {
        command: inner[0] as string,
        args: inner.slice(1),
        cwd: spec.cwd,
        ...(switchUser ? { uid: user.uid, gid: user.gid } : {}),
        namespaced: false,
      };
    }
    // Runs that start as root inside their namespaces (unshare's, and bubblewrap's in a user
    // namespace) drop root's capabilities there even when they keep the user.
    const startsAsRoot =
      launcher.tool === "unshare" || (launcher.tool === "bubblewrap" && launcher.namespace !== undefined);
    const drop = switchUser ? this.dropArgs(user) : startsAsRoot ? this.dropArgs() : [];
    const inside = {
      mounts: mounts ?? [],
      network: network !== false,
      cwd: spec.cwd,
      command: [...drop, ...inner],
    };
    if (launcher.tool === "bubblewrap") {
      const argv = bwrapArgs({ ...inside, system: this.system, place: launcher.place });
      const fds = launcher.namespace ? { extraFds: [launcher.namespace.fd] } : {};
      return { command: launcher.bwrap, args: argv, cwd: "/", ...fds, namespaced: true };
    }
    try {
      launcher.base.ensure();
      return {
        ...unshareArgs({ ...inside, tools: launcher.tools, base: launcher.base }),
        cwd: "/",
        namespaced: true,
      };
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  }

  /**
   * setpriv's arguments for the run: another user with no capabilities and no way to regain
   * them; without a user (unshare's runs start as root) only the capabilities are dropped.
   */
  private dropArgs(user?: { uid: number; gid: number }): string[] {
    const who = user ? [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups"] : [];
    return [
      this.helpers.setpriv as string,
      ...who,
      "--no-new-privs",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--",
    ];
  }

  private limitArgs(limits: ResourceLimits | undefined, switchUser: boolean): string[] {
    if (!limits || !this.helpers.prlimit) return [];
    const args: string[] = [];
    // RLIMIT_NPROC counts every process of the user: only meaningful for a user of the run's own.
    if (limits.processes !== undefined && switchUser) args.push(`--nproc=${limits.processes}`);
    if (limits.memoryBytes !== undefined) args.push(`--as=${limits.memoryBytes}`);
    if (limits.fileSizeBytes !== undefined) args.push(`--fsize=${limits.fileSizeBytes}`);
    if (limits.openFiles !== undefined) args.push(`--nofile=${limits.openFiles}`);
    if (limits.cpuSeconds !== undefined) args.push(`--cpu=${limits.cpuSeconds}`);
    if (args.length === 0) return [];
    return [this.helpers.prlimit, "--core=0", ...args, "--"];
  }
}

/** What the sandbox leaves open, for the start-up log, `GET /health` and the owner's pages. */
function unprotected(launcher: Launcher, users: boolean): string[] {
  const namespaces = launcher.tool !== "none";
  const gaps: string[] = [];
  if (!users)
    gaps.push(
      "every run is this service's own user: runs can read each other's files and the service's state",
    );
  if (!namespaces) {
    gaps.push("runs see every file of this machine that Unix permissions let their user read");
    gaps.push("a run meant to have no network still has it");
    gaps.push("/tmp is shared with the machine");
    if (users) gaps.push("processes a run leaves behind are ended by sweeps of its user, not by the kernel");
  }
  if (launcher.tool === "bubblewrap" && launcher.place.proc === "shared")
    gaps.push(
      "/proc is this service's: a run sees the command lines of this container's processes (not their files, environment or memory)",
    );
  gaps.push("no system-call filter: the whole kernel interface is reachable");
  gaps.push("a run with network reaches whatever this machine reaches, its loopback services included");
  gaps.push("memory and CPU are bounded by resource limits only (no cgroup)");
  return gaps;
}

function describe(status: SandboxStatus, logger: Logger): void {
  const gaps = `It does not protect against: ${status.unprotected.join("; ")}.`;
  if (status.mode === "namespaces" && status.tool === "bubblewrap" && status.reason) {
    logger.info(`Sandbox: namespaces (bubblewrap; ${status.reason}). ${gaps}`);
  } else if (status.mode === "namespaces" && status.tool === "bubblewrap") {
    logger.info(`Sandbox: namespaces (bubblewrap). ${gaps}`);
  } else if (status.mode === "namespaces") {
    logger.info(`Sandbox: namespaces (util-linux unshare, since ${status.reason}). ${gaps}`);
  } else {
    logger.warn(
      `Sandbox: plain mode (${status.reason}). Untrusted processes run without private namespaces. ${gaps} ` +
        "Install bubblewrap (Debian package `bubblewrap`), or run as root, to enable namespaces; in a " +
        "container, give the service the seccomp profile seccomp-sandbox.json (see docker-compose.yml).",
    );
  }
}

/** A launcher reports a child killed by a signal as exit code 128 + signal number. */
function fromSignalExit(result: ProcessResult): ProcessResult {
  if (result.exitCode !== null && result.exitCode > 128 && result.exitCode < 160 && !result.timedOut) {
    const signal = signalName(result.exitCode - 128);
    if (signal) return { ...result, exitCode: null, signal };
  }
  return result;
}

function signalName(number: number): NodeJS.Signals | undefined {
  const names: Record<number, NodeJS.Signals> = { 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM" };
  return names[number];
}

function refused(error: unknown): ProcessResult {
  return {
    exitCode: null,
    signal: null,
    stdout: "",
    stderr: "",
    stdoutTruncated: false,
    stderrTruncated: false,
    timedOut: false,
    spawnError: error instanceof Error ? error.message : String(error),
    durationMs: 0,
  };
}
