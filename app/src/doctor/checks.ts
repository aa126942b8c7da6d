import { readdir, statfs } from "node:fs/promises";
import { errorMessage } from "@stavrobot/common";
import { BACKUP_NAME } from "../db/backup-retention.js";

/**
 * What `npm run doctor` and `GET /health?deep=1` say: one line per thing that must work, whether it
 * does, and when it does not, what to do about it. `warn` works but needs a look soon.
 */
export type CheckState = "ok" | "warn" | "fail";

export interface Check {
  name: string;
  state: CheckState;
  detail: string;
  /** What to do, when the state is not ok. */
  fix?: string;
}

export interface Checked {
  /** `fail` when any check fails, `warn` when any warns, else `ok`. */
  status: CheckState;
  checks: Check[];
}

export function summarise(checks: Check[]): Checked {
  const status = checks.some((check) => check.state === "fail")
    ? "fail"
    : checks.some((check) => check.state === "warn")
      ? "warn"
      : "ok";
  return { status, checks };
}

const MB = 1024 * 1024;
const GB = 1024 * MB;

/** Free space where the data directory lives: warn under 1 GB, fail under 100 MB. */
export async function diskCheck(dataDir: string): Promise<Check> {
  try {
    const stats = await statfs(dataDir);
    const free = stats.bavail * stats.bsize;
    const detail = `${formatBytes(free)} free where ${dataDir} is`;
    if (free < 100 * MB)
      return { name: "disk", state: "fail", detail, fix: "Free some space: the database cannot write." };
    if (free < GB) return { name: "disk", state: "warn", detail, fix: "Free some space soon." };
    return { name: "disk", state: "ok", detail };
  } catch (error) {
    return { name: "disk", state: "fail", detail: `cannot read ${dataDir}: ${errorMessage(error)}` };
  }
}

/**
 * The newest backup in `backupDir` and its age against the interval backups are taken at (none
 * after two intervals: warn). `intervalSeconds` 0 means backups are off.
 */
export async function backupCheck(
  backupDir: string,
  intervalSeconds: number,
  now: Date = new Date(),
): Promise<Check> {
  const name = "backups";
  if (intervalSeconds === 0) {
    return {
      name,
      state: "warn",
      detail: "scheduled backups are off (BACKUP_INTERVAL_SECONDS=0)",
      fix: "Take one with npm run backup, or set BACKUP_INTERVAL_SECONDS.",
    };
  }
  let names: string[];
  try {
    names = (await readdir(backupDir)).filter((entry) => BACKUP_NAME.test(entry));
  } catch {
    names = [];
  }
  const newest = names.sort().at(-1);
  if (!newest) {
    return {
      name,
      state: "warn",
      detail: `no backup in ${backupDir} yet`,
      fix: "npm run backup takes one now; one is taken every interval while the app runs.",
    };
  }
  const match = BACKUP_NAME.exec(newest);
  const stamp = match?.[1] ?? "";
  const taken = new Date(`${stamp.slice(0, 10)}T${stamp.slice(11).replaceAll("-", ":")}Z`);
  const ageSeconds = Math.max(0, (now.getTime() - taken.getTime()) / 1000);
  const detail = `the newest, ${newest}, is ${formatAge(ageSeconds)} old`;
  if (ageSeconds > 2 * intervalSeconds) {
    return {
      name,
      state: "warn",
      detail,
      fix: "Backups have stopped: see the app's log for why, and take one with npm run backup.",
    };
  }
  return { name, state: "ok", detail };
}

export function formatBytes(bytes: number): string {
  if (bytes >= GB) return `${(bytes / GB).toFixed(1)} GB`;
  if (bytes >= MB) return `${(bytes / MB).toFixed(0)} MB`;
  return `${Math.round(bytes / 1024)} KB`;
}

function formatAge(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86_400)} days`;
}
