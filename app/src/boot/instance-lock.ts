import { randomBytes } from "node:crypto";
import {
  existsSync,
  linkSync,
  mkdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { EXIT_CANNOT_WRITE, EXIT_IN_USE, StartRefused } from "@stavrobot/common";

/** In the data directory: the instance running on it, while it runs. */
export const LOCK_FILE = "instance.lock";

/** What the lock file says about the instance holding it. */
export interface InstanceRecord {
  pid: number;
  /** The process's start time in clock ticks since boot (Linux), so a reused pid is not mistaken for it. */
  processStart?: string;
  /** Tells this holder's file from a later one's. */
  token: string;
  /** Where its servers listen, once they do (for `npm run backup` and `npm run chat` to ask it). */
  port?: number;
  host?: string;
  internalPort?: number;
  internalHost?: string;
  /** Set when its clean stop began: a start waits for it (STOPPING_WAIT_MS) instead of refusing. */
  stopping?: boolean;
}

/** How long a start waits for an instance that is stopping before it refuses. */
export const STOPPING_WAIT_MS = 10_000;

export interface InstanceLock {
  readonly path: string;
  /** Adds facts to the record (the ports, once listening). */
  update(fields: Partial<Pick<InstanceRecord, "port" | "host" | "internalPort" | "internalHost">>): void;
  /**
   * Marks the record `stopping` (a clean stop began): a start meanwhile waits for this one instead
   * of refusing. Never throws: a stop must go on even where the mark cannot be written.
   */
  markStopping(): void;
  /** Removes the lock file if it is still this holder's. */
  release(): void;
}

/**
 * One data directory, one running instance: takes `<dataDir>/instance.lock`, or refuses the start
 * naming the pid of the live instance holding it. The file is created with its whole content at
 * once (linked into place, so no reader sees it half-written); a lock left by a process that is
 * gone (killed, a zombie not yet reaped, or a container's earlier life whose pid this process now
 * has) is taken over at once. A holder that is stopping (its record says so, or the kernel is
 * ending it) is waited for, up to `waitMs`. This is the first write of a start, so a data
 * directory it may not write fails here, in one line.
 */
export async function acquireInstanceLock(
  dataDir: string,
  { waitMs = STOPPING_WAIT_MS }: { waitMs?: number } = {},
): Promise<InstanceLock> {
  const path = join(dataDir, LOCK_FILE);
  const record: InstanceRecord = {
    pid: process.pid,
    processStart: readStat(process.pid)?.start,
    token: randomBytes(8).toString("hex"),
  };
  const deadline = Date.now() + waitMs;
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    for (let takeovers = 0; takeovers < 5;) {
      if (createWith(path, record)) return holding(path, record);
      const holder = readInstanceRecord(path);
      const state = holder ? holderState(holder) : "gone";
      if (state === "running") {
        throw new StartRefused(
          `Another Stavrobot (pid ${holder?.pid}) is running on the data directory ${dataDir}: stop it ` +
            `first (kill ${holder?.pid}), or give this one another DATA_DIR. Only one instance may use a ` +
            `data directory (both would open its database).`,
          EXIT_IN_USE,
        );
      }
      if (state === "stopping") {
        if (Date.now() >= deadline) {
          throw new StartRefused(
            `Another Stavrobot (pid ${holder?.pid}) is still stopping on the data directory ${dataDir} ` +
              `after ${Math.round(waitMs / 1000)} s: start again once it has stopped (or kill -9 ` +
              `${holder?.pid}). Only one instance may use a data directory (both would open its database).`,
            EXIT_IN_USE,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      // Its holder is gone: remove it and try again (another starter may win the next round).
      removeIfExists(path);
      takeovers++;
    }
  } catch (error) {
    throw cannotWrite(error, dataDir) ?? error;
  }
  throw new StartRefused(`Could not take ${path}: it keeps changing; is another start running?`, EXIT_IN_USE);
}

/** The live instance recorded in `dataDir`, if one is running there (or is stopping). */
export function runningInstance(dataDir: string): InstanceRecord | undefined {
  const holder = readInstanceRecord(join(dataDir, LOCK_FILE));
  return holder && holderState(holder) !== "gone" ? holder : undefined;
}

/**
 * The StartRefused for a file-system error of a start (the data directory or a file in it not
 * writable), or undefined for any other error. The fix names a folder that exists: the data
 * directory to give to this user, or, where it is not made yet, the command that makes it.
 */
export function cannotWrite(error: unknown, dataDir: string): StartRefused | undefined {
  const { code, path, syscall } = (error ?? {}) as NodeJS.ErrnoException;
  if (code !== "EACCES" && code !== "EPERM" && code !== "EROFS" && code !== "ENOTDIR") return undefined;
  const where = path ?? dataDir;
  const uid = process.getuid?.();
  const fix =
    code === "EROFS"
      ? "it is on a read-only file system"
      : code === "ENOTDIR"
        ? "a part of that path is a file, not a directory"
        : permissionFix(where, syscall, dataDir, uid);
  return new StartRefused(
    `Cannot write ${where} (${code}): ${fix}, or set DATA_DIR to a directory this user can write.`,
    EXIT_CANNOT_WRITE,
  );
}

function permissionFix(
  where: string,
  syscall: string | undefined,
  dataDir: string,
  uid: number | undefined,
): string {
  const user = `this user${uid === undefined ? "" : ` (uid ${uid})`}`;
  // The folder that has to be written in: the path itself when it was to be made, else its folder.
  const folder = resolve(syscall === "mkdir" ? where : dirname(where));
  const data = resolve(dataDir);
  const target = folder === data || folder.startsWith(data + sep) ? data : folder;
  if (existsSync(target)) {
    return (
      `${user} may not write there` +
      (uid === undefined ? "" : `: give it to this user (e.g. sudo chown -R ${uid} ${target})`)
    );
  }
  return (
    `${target} does not exist yet and ${user} may not create it in ${nearestExisting(target)}` +
    (uid === undefined
      ? ""
      : `: make it and give it to this user (e.g. sudo mkdir -p ${target} && sudo chown -R ${uid} ${target})`)
  );
}

/** The closest folder above `path` that exists (the root at worst). */
function nearestExisting(path: string): string {
  let folder = dirname(path);
  while (!existsSync(folder) && dirname(folder) !== folder) folder = dirname(folder);
  return folder;
}

function holding(path: string, record: InstanceRecord): InstanceLock {
  let current = record;
  const onExit = () => release();
  // A crash or process.exit() still removes it; only a kill -9 leaves it (a dead pid: taken over).
  process.on("exit", onExit);
  const ours = () => readInstanceRecord(path)?.token === record.token;
  const release = () => {
    process.off("exit", onExit);
    if (ours()) removeIfExists(path);
  };
  const update = (fields: Partial<InstanceRecord>) => {
    if (!ours()) return;
    current = { ...current, ...fields };
    const partial = `${path}.${current.token}`;
    writeFileSync(partial, JSON.stringify(current), { mode: 0o600 });
    renameSync(partial, path);
  };
  return {
    path,
    update,
    markStopping() {
      try {
        update({ stopping: true });
      } catch {
        // A start meanwhile is refused rather than waiting: the stop itself goes on.
      }
    },
    release,
  };
}

/** Creates `path` holding `record`, atomically; false when it exists already. */
function createWith(path: string, record: InstanceRecord): boolean {
  const partial = `${path}.${record.token}`;
  writeFileSync(partial, JSON.stringify(record), { mode: 0o600 });
  try {
    linkSync(partial, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    // A file system without hard links: an exclusive create (a reader may then see it empty).
    try {
      writeFileSync(path, JSON.stringify(record), { mode: 0o600, flag: "wx" });
      return true;
    } catch (fallback) {
      if ((fallback as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw fallback;
    }
  } finally {
    removeIfExists(partial);
  }
}

function readInstanceRecord(path: string): InstanceRecord | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const parsed = JSON.parse(text) as Partial<InstanceRecord>;
    if (Number.isSafeInteger(parsed.pid) && typeof parsed.token === "string") return parsed as InstanceRecord;
  } catch {
    // Not a record: an interrupted write of an older start, held by nobody.
  }
  return { pid: 0, token: "" };
}

/** PF_EXITING in /proc/<pid>/stat's flags: the kernel is ending the process (killed, or exiting). */
const PF_EXITING = 0x4;

/**
 * Whether the recorded process still runs, is on its way out, or is gone. Gone: no such process,
 * this very process (a container restarted with the same pid), a later process given the same pid
 * (its start time differs), or a zombie (dead, its exit status not yet collected by its parent:
 * after a `kill -9` of `npm start`'s process group the launcher is one until init reaps it).
 * Stopping: the kernel is ending it, or its record says its clean stop began.
 */
function holderState(holder: InstanceRecord): "running" | "stopping" | "gone" {
  if (holder.pid <= 0 || holder.pid === process.pid) return "gone";
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: alive, but another user's.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return "gone";
  }
  const stat = readStat(holder.pid);
  if (stat) {
    if (holder.processStart !== undefined && stat.start !== holder.processStart) return "gone";
    if (stat.state === "Z" || stat.state === "X" || stat.state === "x") return "gone";
    if (stat.flags & PF_EXITING) return "stopping";
  }
  return holder.stopping ? "stopping" : "running";
}

interface ProcessStat {
  /** R, S, D, Z (zombie), X (dead), …: field 3. */
  state: string;
  /** The kernel's PF_* flags: field 9. */
  flags: number;
  /** Start time in clock ticks since boot: field 22. */
  start: string;
}

/** /proc/<pid>/stat (Linux), read after the command name, which may hold spaces and parentheses. */
function readStat(pid: number): ProcessStat | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0] ?? "", flags: Number(fields[6]), start: fields[19] ?? "" };
}

function removeIfExists(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
}
