import { execFileSync } from "node:child_process";
import { accessSync, constants, existsSync, lstatSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { delimiter, dirname, isAbsolute, join, relative, sep } from "node:path";
import type { Logger } from "../logger.js";
import type { ProcessResult, ProcessSpec } from "./process.js";
import { runProcess } from "./process.js";

/**
 * The one way any service starts an untrusted process (a plugin tool, a Python script, the coding
 * agent): as a given user, with only the mounts it needs, resource limits, a timeout that ends the
 * whole process tree, and capped output.
 *
 * Two modes, chosen once at start-up:
 * - "namespaces": bubblewrap gives the process its own mount, PID, IPC and UTS namespaces (and, on
 *   request, an empty network namespace). Only the system directories, the runtimes and the mounts
 *   a caller lists exist in it; `/tmp` is private. When the sandbox's first process exits, the
 *   kernel ends everything else in it, so nothing a tool starts can outlive its run.
 * - "plain": bubblewrap is missing or cannot create namespaces (a container without the right
 *   capabilities). The process runs directly, as the given user, in its own process group, with
 *   the same limits and timeouts; callers must not rely on private mounts or network removal.
 */
export type SandboxMode = "namespaces" | "plain";

export interface Mount {
  /** Path on this machine. */
  source: string;
  /** Path inside the sandbox. */
  target: string;
  writable?: boolean;
}

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

export interface SandboxStatus {
  mode: SandboxMode;
  /** Whether runs can switch to another user (the service is root). */
  users: boolean;
  /** Why the namespaces mode is not used. */
  reason?: string;
}

export interface SandboxOptions {
  logger: Logger;
  /** Force plain mode (tests, or an operator who knows the namespaces cannot work). */
  disableNamespaces?: boolean;
  /** Where to look for bwrap, setpriv and prlimit; default this process's PATH. */
  path?: string;
}

/** The PATH of an untrusted process when nothing else is given: the system directories. */
export const SYSTEM_TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The system directories every sandbox gets read-only (symlinks such as /bin → usr/bin kept). */
const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

export class Sandbox {
  private constructor(
    readonly status: SandboxStatus,
    private readonly tools: { bwrap?: string; setpriv?: string; prlimit?: string },
    private readonly systemArgs: readonly string[],
  ) {}

  /** Finds the helpers and checks, by running one real sandbox, that namespaces work here. */
  static create(options: SandboxOptions): Sandbox {
    const users = process.getuid?.() === 0;
    const path = options.path ?? process.env.PATH ?? "/usr/bin:/bin";
    const tools = {
      bwrap: which("bwrap", path),
      setpriv: which("setpriv", path),
      prlimit: which("prlimit", path),
    };
    const plain = (reason: string): Sandbox => {
      options.logger.warn(
        `Sandbox: plain mode (${reason}). Untrusted processes run without private namespaces: ` +
          "no private /tmp, no hidden files beyond Unix permissions, no network removal. " +
          "Install bubblewrap (Debian package `bubblewrap`) and allow namespaces to enable it.",
      );
      return new Sandbox({ mode: "plain", users, reason }, tools, []);
    };
    if (options.disableNamespaces) return plain("disabled by configuration");
    if (!tools.bwrap) return plain("bwrap was not found");
    if (users && !tools.setpriv) return plain("setpriv (util-linux) was not found");
    const systemArgs = systemMountArgs();
    try {
      execFileSync(tools.bwrap, [...baseArgs(true), ...systemArgs, "--", "/bin/sh", "-c", "exit 0"], {
        stdio: "pipe",
        timeout: 10_000,
      });
    } catch (error) {
      const detail = (error as { stderr?: Buffer }).stderr?.toString().trim() || String(error);
      return plain(`bwrap cannot create namespaces here: ${detail.split("\n")[0]}`);
    }
    return new Sandbox({ mode: "namespaces", users }, tools, systemArgs);
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
    const switchUser = this.status.users && user !== undefined;
    const limitArgs = this.limitArgs(limits, switchUser);
    if (this.status.mode === "plain") {
      const argv = [...limitArgs, command, ...(args ?? [])];
      return runProcess({
        ...rest,
        command: argv[0] as string,
        args: argv.slice(1),
        ...(switchUser ? { uid: user.uid, gid: user.gid } : {}),
      });
    }
    const argv: string[] = [...baseArgs(network !== false), ...this.systemArgs];
    // bwrap creates missing parents of a mount point with mode 700 (root's): create them 755 first,
    // so the run's user can reach what is mounted below them.
    const made = new Set<string>(["/", "/tmp"]);
    for (const mount of mounts ?? []) {
      for (const parent of ancestors(mount.target)) {
        if (made.has(parent) || isSystemPath(parent)) continue;
        made.add(parent);
        argv.push("--perms", "0755", "--dir", parent);
      }
      made.add(mount.target);
      argv.push(mount.writable ? "--bind" : "--ro-bind", mount.source, mount.target);
    }
    argv.push("--chdir", spec.cwd, "--");
    if (switchUser) {
      argv.push(
        this.tools.setpriv as string,
        `--reuid=${user.uid}`,
        `--regid=${user.gid}`,
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
      );
    }
    argv.push(...limitArgs, command, ...(args ?? []));
    return runProcess({ ...rest, command: this.tools.bwrap as string, args: argv, cwd: "/" }).then(fromBwrap);
  }

  private limitArgs(limits: ResourceLimits | undefined, switchUser: boolean): string[] {
    if (!limits || !this.tools.prlimit) return [];
    const args: string[] = [];
    // RLIMIT_NPROC counts every process of the user: only meaningful for a user of the run's own.
    if (limits.processes !== undefined && switchUser) args.push(`--nproc=${limits.processes}`);
    if (limits.memoryBytes !== undefined) args.push(`--as=${limits.memoryBytes}`);
    if (limits.fileSizeBytes !== undefined) args.push(`--fsize=${limits.fileSizeBytes}`);
    if (limits.openFiles !== undefined) args.push(`--nofile=${limits.openFiles}`);
    if (limits.cpuSeconds !== undefined) args.push(`--cpu=${limits.cpuSeconds}`);
    if (args.length === 0) return [];
    return [this.tools.prlimit, "--core=0", ...args, "--"];
  }
}

function baseArgs(network: boolean): string[] {
  return [
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(network ? [] : ["--unshare-net"]),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
  ];
}

/** Read-only system directories as they exist here (a symlinked /bin stays a symlink). */
function systemMountArgs(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    const info = lstatOrUndefined(dir);
    if (!info) continue;
    if (info.isSymbolicLink()) args.push("--symlink", readlinkSync(dir), dir);
    else if (info.isDirectory()) args.push("--ro-bind", dir, dir);
  }
  // DNS: /etc/resolv.conf often points into /run (systemd-resolved), which is not mounted.
  const resolv = realpathOrUndefined("/etc/resolv.conf");
  if (resolv && !resolv.startsWith("/etc/")) args.push("--ro-bind-try", dirname(resolv), dirname(resolv));
  return args;
}

/** bwrap reports a child killed by a signal as exit code 128 + signal number. */
function fromBwrap(result: ProcessResult): ProcessResult {
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

/**
 * The directories a tool's PATH names, as read-only mounts, so runtimes installed outside the
 * system directories (uv in ~/.local/bin, pyenv, nvm) are found inside a sandbox. A directory in a
 * home directory brings its whole tool root (`~/.pyenv`, `~/.nvm`), since shims call into it,
 * except `~/.local/bin`, which is mounted alone (`~/.local/share` holds other programs' data).
 */
export function runtimeMounts(toolPath: string, home?: string): Mount[] {
  const mounts = new Map<string, Mount>();
  const add = (dir: string): void => {
    if (!isAbsolute(dir) || !existsSync(dir) || isSystemPath(dir)) return;
    if ([...mounts.keys()].some((known) => dir === known || dir.startsWith(known + sep))) return;
    for (const known of [...mounts.keys()]) if (known.startsWith(dir + sep)) mounts.delete(known);
    mounts.set(dir, { source: dir, target: dir });
  };
  for (const entry of toolPath.split(delimiter)) {
    if (!entry) continue;
    const dir = toolRoot(entry, home);
    add(dir);
    const real = realpathOrUndefined(entry);
    if (real && real !== entry) add(toolRoot(real, home));
  }
  return [...mounts.values()];
}

function toolRoot(dir: string, home: string | undefined): string {
  if (!home || !isAbsolute(home)) return dir;
  const rel = relative(home, dir);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) return dir;
  const parts = rel.split(sep);
  if (parts[0] === ".local") return dir;
  return join(home, parts[0] as string);
}

/** `/a/b/c` → `/a`, `/a/b`. */
function ancestors(path: string): string[] {
  const parts = path.split("/").filter(Boolean);
  return parts.slice(0, -1).map((_, index) => "/" + parts.slice(0, index + 1).join("/"));
}

function isSystemPath(dir: string): boolean {
  return SYSTEM_DIRS.some((system) => dir === system || dir.startsWith(system + sep));
}

/** The absolute path of a program found on `path`, or undefined. */
export function which(program: string, path: string): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, program);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function realpathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}
