import { spawn, spawnSync } from "node:child_process";
import { closeSync, openSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";

/**
 * A user namespace of the service's own, for bubblewrap where root cannot make namespaces
 * directly: a container gives root no CAP_SYS_ADMIN, yet (with a seccomp profile that allows it)
 * root may create a user namespace and, inside it, the mount, PID, IPC, UTS and network
 * namespaces of a run.
 *
 * The namespace maps every user and group of the service's own namespace to itself, so inside it
 * root is still root for files (owner checks and ownership stay exactly as outside) and a run can
 * still switch to its plugin's user with setpriv. Its capabilities only reach what the namespace
 * owns: namespaces made in it, never the container's own mounts.
 *
 * util-linux `unshare --user` creates it in a short-lived helper; the service (which has
 * CAP_SETUID and CAP_SETGID here) writes the identity maps, opens the namespace and keeps the
 * descriptor for its lifetime, so the helper can go. bubblewrap then enters it with `--userns FD`.
 */
export interface UserNamespace {
  /** A descriptor of the namespace, open in this process (O_CLOEXEC: passed on explicitly). */
  fd: number;
}

/** How long the helper may take to enter its namespace. */
const HELPER_TIMEOUT_MS = 5_000;

/**
 * Makes the namespace with `unshare` (util-linux). Returns why it could not, instead, when this
 * machine refuses (a seccomp profile without `unshare`, no CAP_SETUID, user namespaces disabled).
 */
export function holdUserNamespace(unshare: string, sh: string): UserNamespace | string {
  const own = readlinkSync("/proc/self/ns/user");
  // A first try that can say why it fails (the helper below is watched without an event loop).
  const probe = spawnSync(unshare, ["--user", "--", sh, "-c", "exit 0"], { timeout: HELPER_TIMEOUT_MS });
  if (probe.error) return `util-linux unshare could not be started: ${probe.error.message}`;
  if (probe.status !== 0)
    return `util-linux unshare cannot create a user namespace here${tail(probe.stderr.toString())}`;
  let helper;
  try {
    // The helper waits on its stdin, which this process closes once the namespace is held.
    helper = spawn(unshare, ["--user", "--", sh, "-c", "read -r _"], {
      stdio: ["pipe", "ignore", "ignore"],
    });
  } catch (error) {
    return `util-linux unshare could not be started: ${(error as Error).message}`;
  }
  helper.on("error", () => {});
  const pid = helper.pid;
  try {
    if (pid === undefined) return "util-linux unshare could not be started";
    const entered = waitFor(() => {
      try {
        return readlinkSync(`/proc/${pid}/ns/user`) !== own;
      } catch {
        return undefined; // The helper is gone: unshare failed.
      }
    });
    if (entered !== true) {
      const why = entered === undefined ? "it exited" : "it timed out";
      return `util-linux unshare could not create a user namespace (${why})`;
    }
    try {
      writeFileSync(`/proc/${pid}/uid_map`, identityMap("/proc/self/uid_map"));
      writeFileSync(`/proc/${pid}/gid_map`, identityMap("/proc/self/gid_map"));
    } catch (error) {
      return `the user namespace's user and group maps could not be written: ${(error as Error).message}`;
    }
    return { fd: openSync(`/proc/${pid}/ns/user`, "r") };
  } finally {
    helper.stdin?.end();
    helper.kill("SIGKILL");
  }
}

/** Releases the namespace (once nothing will run in it any more). */
export function releaseUserNamespace(namespace: UserNamespace): void {
  try {
    closeSync(namespace.fd);
  } catch {
    // Already closed.
  }
}

/** This namespace's own ids, each mapped to itself: `ID ID COUNT` for every range of `file`. */
export function identityMap(file: string): string {
  return readFileSync(file, "utf8")
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length === 3)
    .map(([inside, , count]) => `${inside} ${inside} ${count}\n`)
    .join("");
}

/**
 * Polls `check` until it says true or undefined (gave up), or the helper's time is out (false).
 * Synchronous: the sandbox is chosen once, at start-up, before the service listens.
 */
function waitFor(check: () => boolean | undefined): boolean | undefined {
  const deadline = Date.now() + HELPER_TIMEOUT_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    const result = check();
    if (result !== false) return result;
    if (Date.now() > deadline) return false;
    Atomics.wait(pause, 0, 0, 2);
  }
}

function tail(stderr: string): string {
  const line = stderr.trim().split("\n").at(-1);
  return line ? `: ${line}` : "";
}
