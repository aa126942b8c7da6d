import { readdir } from "node:fs/promises";
import { errorMessage, type Logger } from "@stavrobot/common";
import { BACKUP_NAME } from "./backup-retention.js";
import type { EmbeddedFiles } from "./database.js";
import { backupOpenDatabase, removeUnfinishedBackups, type LiveBackup } from "./live-backup.js";

export interface BackupScheduleDeps {
  files: EmbeddedFiles;
  destDir: string;
  /** Time between backups (BACKUP_INTERVAL_SECONDS); the first is due that long after the newest there. */
  intervalMs: number;
  /** After a failure, the next try comes sooner than a whole interval (as pg-backup does). */
  retryMs?: number;
  now?: () => Date;
  logger: Logger;
}

/**
 * The first backup of a start comes no sooner than this (or an interval, if shorter): the start
 * and the first turns, when the owner is most likely waiting, do not share the machine with it.
 */
const FIRST_DELAY_MS = 10 * 60_000;

/** setTimeout's longest delay; a longer wait is taken in several. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The embedded database's daily backup, taken by the running app (a PostgreSQL server has
 * compose's pg-backup instead). The next one is due an interval after the newest backup in the
 * directory, so restarts do not add backups, and not before FIRST_DELAY_MS after the start; one
 * at a time, `backup()` (from `npm run backup`) included.
 */
export class BackupSchedule {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<LiveBackup> | undefined;
  private stopped = false;
  private readonly stopping = new AbortController();
  private readonly now: () => Date;

  constructor(private readonly deps: BackupScheduleDeps) {
    this.now = deps.now ?? (() => new Date());
  }

  /** Clears what a killed backup left and arms the timer for the next one due. */
  async start(): Promise<void> {
    const { destDir, intervalMs, logger } = this.deps;
    await removeUnfinishedBackups(destDir, logger);
    const newest = await newestBackupTime(destDir);
    const due = newest === undefined ? 0 : newest + intervalMs - this.now().getTime();
    const delay = Math.max(Math.min(intervalMs, FIRST_DELAY_MS), due);
    logger.info(`backing up the embedded database to ${destDir} every ${intervalMs / 1000} s`, {
      nextInSeconds: Math.round(delay / 1000),
    });
    this.arm(delay);
  }

  /** Takes a backup now (after the one running, if any). */
  backup(): Promise<LiveBackup> {
    const previous = this.running?.catch(() => undefined) ?? Promise.resolve();
    const next = previous.then(() =>
      backupOpenDatabase(this.deps.files, this.deps.destDir, this.now(), {
        logger: this.deps.logger,
        signal: this.stopping.signal,
      }),
    );
    this.running = next;
    return next;
  }

  /**
   * No more backups: one in progress is abandoned (a stop must not wait for a large archive) and
   * waited for, so the database never closes under it.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.stopping.abort();
    await this.running?.catch(() => undefined);
  }

  private arm(delayMs: number): void {
    if (this.stopped) return;
    const wait = Math.min(delayMs, MAX_TIMER_MS);
    const due = this.now().getTime() + delayMs;
    this.timer = setTimeout(() => {
      if (wait < delayMs) return this.arm(due - this.now().getTime());
      void this.scheduled();
    }, wait);
    // A pending backup never keeps the process alive.
    this.timer.unref();
  }

  private async scheduled(): Promise<void> {
    const { intervalMs, logger } = this.deps;
    const retryMs = Math.min(this.deps.retryMs ?? 300_000, intervalMs);
    try {
      await this.backup();
      this.arm(intervalMs);
    } catch (error) {
      if (this.stopped) return;
      logger.error("backup failed", { error: errorMessage(error), retryInSeconds: retryMs / 1000 });
      this.arm(retryMs);
    }
  }
}

/** The time of the newest backup named in `destDir` (by its name), if any. */
async function newestBackupTime(destDir: string): Promise<number | undefined> {
  const names = await readdir(destDir).catch(() => [] as string[]);
  let newest: number | undefined;
  for (const name of names) {
    const stamp = BACKUP_NAME.exec(name)?.[1];
    if (!stamp) continue;
    const time = Date.parse(`${stamp.slice(0, 10)}T${stamp.slice(11).replaceAll("-", ":")}Z`);
    if (newest === undefined || time > newest) newest = time;
  }
  return newest;
}
