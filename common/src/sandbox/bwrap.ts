import type { Mount, SystemEntry } from "./mounts.js";
import { ancestors, isSystemPath } from "./mounts.js";

/** Where bubblewrap makes its namespaces, and whether it can mount a /proc of the run's own. */
export interface BwrapPlace {
  /** Inside the user namespace passed to bubblewrap as descriptor 3 (`--userns 3`). */
  userns: boolean;
  /**
   * "private": a new /proc showing the run's processes only. "shared": the service's /proc
   * read-only, where a new one is refused (in a user namespace under Docker, whose masked /proc
   * paths make the kernel refuse to mount another).
   */
  proc: "private" | "shared";
}

/** Descriptor number of the user namespace in bubblewrap's process (the first after stdio). */
export const USERNS_FD = 3;

const DIRECT: BwrapPlace = { userns: false, proc: "private" };

/**
 * bubblewrap's command line for one run: private mount, PID, IPC and UTS namespaces (and, on
 * request, an empty network namespace), the system entries read-only, the caller's mounts, a
 * private /proc (see `BwrapPlace`), /dev and /tmp; `--die-with-parent` ends the run with the
 * service.
 */
export function bwrapArgs(options: {
  system: readonly SystemEntry[];
  mounts: readonly Mount[];
  network: boolean;
  cwd: string;
  /** The command inside the sandbox (setpriv, prlimit and the program). */
  command: readonly string[];
  place?: BwrapPlace;
}): string[] {
  const argv = [...baseArgs(options.network, options.place ?? DIRECT), ...systemArgs(options.system)];
  // bwrap creates missing parents of a mount point with mode 700 (root's): create them 755 first,
  // so the run's user can reach what is mounted below them.
  const made = new Set<string>(["/", "/tmp"]);
  for (const mount of options.mounts) {
    for (const parent of ancestors(mount.target)) {
      if (made.has(parent) || isSystemPath(parent)) continue;
      made.add(parent);
      argv.push("--perms", "0755", "--dir", parent);
    }
    made.add(mount.target);
    argv.push(mount.writable ? "--bind" : "--ro-bind", mount.source, mount.target);
  }
  argv.push("--chdir", options.cwd, "--", ...options.command);
  return argv;
}

/** The arguments of the probe that checks bubblewrap can make namespaces here. */
export function bwrapProbeArgs(system: readonly SystemEntry[], place: BwrapPlace = DIRECT): string[] {
  return [...baseArgs(true, place), ...systemArgs(system), "--", "/bin/sh", "-c", "exit 0"];
}

function baseArgs(network: boolean, place: BwrapPlace): string[] {
  return [
    ...(place.userns ? ["--userns", String(USERNS_FD)] : []),
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(network ? [] : ["--unshare-net"]),
    ...(place.proc === "private" ? ["--proc", "/proc"] : ["--ro-bind", "/proc", "/proc"]),
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
  ];
}

function systemArgs(system: readonly SystemEntry[]): string[] {
  const args: string[] = [];
  for (const entry of system) {
    if (entry.kind === "symlink") args.push("--symlink", entry.value, entry.path);
    else args.push(entry.optional ? "--ro-bind-try" : "--ro-bind", entry.source, entry.target);
  }
  return args;
}
