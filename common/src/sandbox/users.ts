import { readFile, readdir, stat } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type { Owner } from "../fs/atomic.js";
import type { Logger } from "../logger.js";
import { runProcess } from "./process.js";

/**
 * The Unix users untrusted code runs as when a service is root: created with useradd, looked up in
 * /etc/passwd, removed with userdel, and their processes ended. Callers that create or remove users
 * concurrently serialise those calls themselves (a `SerialLock`); against other processes holding
 * /etc/passwd, useradd and userdel are retried.
 */

/** A user's uid and gid from /etc/passwd, or undefined when there is no user of that name. */
export async function lookupSystemUser(name: string): Promise<Owner | undefined> {
  const passwd = await readFile("/etc/passwd", "utf8");
  for (const line of passwd.split("\n")) {
    const fields = line.split(":");
    if (fields[0] === name) return { uid: Number(fields[2]), gid: Number(fields[3]) };
  }
  return undefined;
}

/** Whether /etc/passwd has an entry, of any name, for `uid`. */
export async function hasAccount(uid: number): Promise<boolean> {
  const passwd = await readFile("/etc/passwd", "utf8").catch(() => "");
  return passwd.split("\n").some((line) => line.split(":")[2] === String(uid));
}

export interface AddUserOptions {
  /** A given uid, with no group of its own (an entry for a uid made elsewhere). */
  uid?: number;
  logger?: Logger;
}

/** Adds a system user with no home and no login shell; one that exists already is fine. */
export async function addSystemUser(name: string, options: AddUserOptions = {}): Promise<void> {
  const args = ["--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"];
  if (options.uid !== undefined) args.push("--no-user-group", "--uid", String(options.uid));
  // 9: the name is taken (someone else just added it).
  await admin("useradd", [...args, name], [0, 9], options.logger);
}

/**
 * The user, created first if it is missing. A user that maps to root (an edited /etc/passwd) is
 * refused: whatever runs as it would have every right.
 */
export async function ensureSystemUser(name: string, logger?: Logger): Promise<Owner> {
  let owner = await lookupSystemUser(name);
  if (!owner) {
    await addSystemUser(name, logger ? { logger } : {});
    owner = await lookupSystemUser(name);
    if (!owner) throw new Error(`User ${name} was not created`);
    logger?.info("created a system user", { user: name, uid: owner.uid });
  }
  if (owner.uid === 0 || owner.gid === 0) throw new Error(`User ${name} maps to root; refusing to use it`);
  return owner;
}

/** Removes a user; one that does not exist is fine. */
export async function removeSystemUser(name: string, logger?: Logger): Promise<void> {
  // 6: no such user.
  await admin("userdel", [name], [0, 6], logger);
}

/** Runs useradd/userdel, tolerating the given exit codes and retrying while /etc/passwd is locked. */
async function admin(command: string, args: string[], okCodes: number[], logger?: Logger): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const result = await runProcess({
      command,
      args,
      cwd: "/",
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
      timeoutMs: 30_000,
      stdoutLimitBytes: 16_384,
      stderrLimitBytes: 16_384,
    });
    if (result.exitCode !== null && okCodes.includes(result.exitCode)) return;
    const detail = result.spawnError ?? (result.stderr.trim() || `exit code ${result.exitCode}`);
    if (/lock/i.test(detail) && attempt < 20) {
      logger?.debug("user database busy, retrying", { command });
      await sleep(50 + Math.random() * 150);
      continue;
    }
    throw new Error(`${command} ${args.join(" ")} failed: ${detail}`);
  }
}

/**
 * SIGKILLs every live process of the given users, pass after pass until one finds none, so that a
 * process forking while it is being swept leaves no child behind (at most `maxPasses`, in case of
 * a fork bomb). Namespaced runs do not need it: the kernel ends their processes with the run.
 */
export async function killUserProcesses(uids: Iterable<number>, maxPasses = 10): Promise<void> {
  const set = new Set(uids);
  if (set.size === 0) return;
  for (let pass = 0; pass < maxPasses; pass++) {
    if ((await killOnce(set)) === 0) return;
  }
}

async function killOnce(uids: ReadonlySet<number>): Promise<number> {
  let killed = 0;
  for (const entry of await readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    // A process's /proc directory belongs to its user: one stat before reading its status.
    const info = await stat(`/proc/${entry}`).catch(() => undefined);
    if (!info || !uids.has(info.uid)) continue;
    const status = await readFile(`/proc/${entry}/status`, "utf8").catch(() => "");
    const match = /^Uid:\s+(\d+)/m.exec(status);
    // Zombies are already dead; they only wait for their parent.
    if (!match || !uids.has(Number(match[1])) || /^State:\s+Z/m.test(status)) continue;
    try {
      process.kill(Number(entry), "SIGKILL");
      killed++;
    } catch {
      // Already gone.
    }
  }
  return killed;
}
