import { execFileSync } from "node:child_process";
import { realpathSync } from "node:fs";
import type { BwrapPlace } from "./bwrap.js";
import { bwrapProbeArgs } from "./bwrap.js";
import type { SystemEntry } from "./mounts.js";
import { which } from "./mounts.js";
import type { SandboxOptions } from "./sandbox.js";
import type { UnshareBase, UnshareTools } from "./unshare.js";
import { prepareUnshare, unshareArgs } from "./unshare.js";
import type { UserNamespace } from "./userns.js";
import { holdUserNamespace, releaseUserNamespace } from "./userns.js";

/**
 * The launchers that make a sandbox's namespaces, and the one start-up probe that chooses among
 * them (sandbox.ts explains the modes).
 */

/** What makes each run's namespaces here; "none" is plain mode. */
export type Launcher =
  | { tool: "bubblewrap"; bwrap: string; place: BwrapPlace; namespace?: UserNamespace }
  | { tool: "unshare"; tools: UnshareTools; base: UnshareBase }
  | { tool: "none" };

/** The launcher this machine allows, and why bubblewrap (directly) is not it. */
export function choose(
  options: SandboxOptions,
  users: boolean,
  path: string,
  helpers: { setpriv?: string | undefined },
  system: readonly SystemEntry[],
): { launcher: Launcher; reason?: string } {
  if (options.disableNamespaces) return { launcher: { tool: "none" }, reason: "disabled by configuration" };
  if (users && !helpers.setpriv)
    return { launcher: { tool: "none" }, reason: "setpriv (util-linux) was not found" };
  const bwrap = which("bwrap", path);
  let why: string;
  if (!bwrap) why = "bubblewrap is not installed";
  else if (options.userNamespaceOnly) why = "bubblewrap was asked to run in a user namespace";
  else {
    try {
      execFileSync(bwrap, bwrapProbeArgs(system), { stdio: "pipe", timeout: 10_000 });
      return { launcher: { tool: "bubblewrap", bwrap, place: { userns: false, proc: "private" } } };
    } catch (error) {
      why = `bubblewrap cannot create namespaces here: ${firstLine(error)}`;
    }
  }
  if (!users)
    return {
      launcher: { tool: "none" },
      reason: `${why}, and without root util-linux unshare cannot either`,
    };
  if (bwrap) {
    const nested = inUserNamespace(bwrap, path, system);
    if (typeof nested !== "string") return { launcher: nested.launcher, reason: `${why}; ${nested.reason}` };
    why = `${why}, nor in a user namespace (${nested})`;
  }
  const tools = unshareTools(path, helpers.setpriv as string);
  if (typeof tools === "string") return { launcher: { tool: "none" }, reason: `${why}, and ${tools}` };
  const base = prepareUnshare(system);
  if (typeof base === "string") return { launcher: { tool: "none" }, reason: `${why}, and ${base}` };
  try {
    const probe = unshareArgs({
      tools,
      base,
      mounts: [],
      network: false,
      cwd: "/",
      command: ["/bin/sh", "-c", "exit 0"],
    });
    execFileSync(probe.command, probe.args, { stdio: "pipe", timeout: 10_000 });
  } catch (error) {
    return {
      launcher: { tool: "none" },
      reason: `${why}, and util-linux unshare cannot create namespaces here: ${firstLine(error)}`,
    };
  }
  return { launcher: { tool: "unshare", tools, base }, reason: why };
}

/**
 * bubblewrap inside a user namespace of the service's own (root only: it writes the namespace's
 * maps), with a /proc of its own where the kernel allows one, else the service's.
 */
function inUserNamespace(
  bwrap: string,
  path: string,
  system: readonly SystemEntry[],
): { launcher: Launcher; reason: string } | string {
  const unshare = helper("unshare", path);
  const sh = helper("sh", path);
  if (!unshare || !sh) return "util-linux unshare was not found";
  const namespace = holdUserNamespace(unshare, sh);
  if (typeof namespace === "string") return namespace;
  const fds = ["pipe", "pipe", "pipe", namespace.fd] as const;
  let refused = "";
  for (const proc of ["private", "shared"] as const) {
    const place: BwrapPlace = { userns: true, proc };
    try {
      execFileSync(bwrap, bwrapProbeArgs(system, place), { stdio: [...fds], timeout: 10_000 });
      const reason =
        "it makes them in a user namespace of this service's own" +
        (proc === "shared" ? `, with this service's /proc, since a new one is refused (${refused})` : "");
      return { launcher: { tool: "bubblewrap", bwrap, place, namespace }, reason };
    } catch (error) {
      refused = firstLine(error);
    }
  }
  releaseUserNamespace(namespace);
  return `bubblewrap cannot use it: ${refused}`;
}

function unshareTools(path: string, setpriv: string): UnshareTools | string {
  const programs = {
    unshare: "unshare",
    sh: "sh",
    mount: "mount",
    umount: "umount",
    pivotRoot: "pivot_root",
    cp: "cp",
    mkdir: "mkdir",
  };
  const found: Record<string, string | undefined> = {};
  for (const [key, program] of Object.entries(programs)) found[key] = helper(program, path);
  const missing = Object.entries(programs).filter(([key]) => found[key] === undefined);
  if (missing.length > 0) {
    const names = missing.map(([, program]) => program).join(", ");
    return `${names} (util-linux, coreutils) ${missing.length === 1 ? "was" : "were"} not found`;
  }
  return { ...(found as Omit<UnshareTools, "setpriv" | "ip">), setpriv, ip: helper("ip", path) };
}

/**
 * A helper program by its real path: the ones that run inside a sandbox (setpriv, prlimit, and
 * unshare's umount after `pivot_root`) must be found there, and the system directories are.
 */
export function helper(program: string, path: string): string | undefined {
  const found = which(program, path);
  if (!found) return undefined;
  try {
    return realpathSync(found);
  } catch {
    return found;
  }
}

function firstLine(error: unknown): string {
  const detail = (error as { stderr?: Buffer }).stderr?.toString().trim() || String(error);
  return detail.split("\n")[0] as string;
}
