import type { Mount, SystemEntry } from "./mounts.js";
import { ancestors, isSystemPath } from "./mounts.js";

/**
 * bubblewrap's command line for one run: private mount, PID, IPC and UTS namespaces (and, on
 * request, an empty network namespace), the system entries read-only, the caller's mounts, a
 * private /proc, /dev and /tmp; `--die-with-parent` ends the run with the service.
 */
export function bwrapArgs(options: {
  system: readonly SystemEntry[];
  mounts: readonly Mount[];
  network: boolean;
  cwd: string;
  /** The command inside the sandbox (setpriv, prlimit and the program). */
  command: readonly string[];
}): string[] {
  const argv = [...baseArgs(options.network), ...systemArgs(options.system)];
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
export function bwrapProbeArgs(system: readonly SystemEntry[]): string[] {
  return [...baseArgs(true), ...systemArgs(system), "--", "/bin/sh", "-c", "exit 0"];
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

function systemArgs(system: readonly SystemEntry[]): string[] {
  const args: string[] = [];
  for (const entry of system) {
    if (entry.kind === "symlink") args.push("--symlink", entry.value, entry.path);
    else args.push(entry.optional ? "--ro-bind-try" : "--ro-bind", entry.source, entry.target);
  }
  return args;
}
