/**
 * The backup of the embedded database while the app runs on it. PGlite's own `dumpDataDir` holds
 * the database for as long as it builds the whole archive in memory, a time that grows with the
 * database (seconds for a few hundred MB), and every statement waits meanwhile. Here the files are copied twice instead: once
 * while the database works on, then, while no statement runs (`EmbeddedFiles.exclusively`), again
 * only those that changed since the first copy began, which makes the copy a consistent image.
 * The archive is then written from that copy, compressed, with the database free.
 */
import { copyFileSync, lstatSync, mkdirSync, readdirSync, rmSync, type Stats } from "node:fs";
import { copyFile, mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { Logger } from "@stavrobot/common";
import { BackupError, EMBEDDED_BACKUP_SUFFIX, applyRetention, isInside, writeAtomically } from "./backup.js";
import { backupName } from "./backup-retention.js";
import type { EmbeddedFiles } from "./database.js";
import { tarDirectory } from "@stavrobot/common";

/**
 * How far before the first copy a change still counts as "during it": a file's modification time
 * is kept by the kernel at a coarse tick, so a write just after a file was read may not move it.
 */
const CLOCK_SLACK_MS = 2_000;

/** What the database keeps only while it is open; a restored copy must not have it. */
const SKIPPED = new Set(["postmaster.pid"]);

export interface BackupOptions {
  logger?: Logger;
  /** Abandons the backup (the app is stopping): nothing is left of it. */
  signal?: AbortSignal;
  /** Runs between the two copies (tests: writes the first copy cannot have seen). */
  betweenCopies?: () => Promise<void>;
}

export interface LiveBackup {
  path: string;
  bytes: number;
  /** How long statements waited for the second copy. */
  pausedMs: number;
}

/**
 * Writes `stavrobot-<now>.pglite.tar.gz` (mode 600, atomically) into `destDir` from the open
 * database, then applies the retention rule there. The same archive as `npm run backup` of a
 * stopped app: `npm run restore` takes either.
 */
export async function backupOpenDatabase(
  files: EmbeddedFiles,
  destDir: string,
  now: Date,
  options: BackupOptions = {},
): Promise<LiveBackup> {
  const { logger, signal } = options;
  if (isInside(destDir, files.dataDir)) {
    throw new BackupError(`the backup directory ${destDir} must not be inside ${files.dataDir}`);
  }
  await mkdir(destDir, { recursive: true, mode: 0o700 });
  const name = backupName(now, EMBEDDED_BACKUP_SUFFIX);
  const copy = join(destDir, `.${name}.copy`);
  await rm(copy, { recursive: true, force: true });
  await mkdir(copy, { mode: 0o700 });
  try {
    const pausedMs = await copyOpenDatabase(files, copy, options);
    const path = join(destDir, name);
    // Compressed on libuv's threads: the event loop only moves the chunks.
    const bytes = await writeAtomically(path, (file) =>
      pipeline(
        Readable.from(tarDirectory(copy)),
        createGzip(),
        async (compressed: AsyncIterable<Buffer>) => {
          for await (const chunk of compressed) await file.write(chunk);
        },
        { signal },
      ),
    );
    logger?.info(`wrote ${path} (${bytes} bytes; statements waited ${pausedMs} ms)`);
    await applyRetention(destDir, now, logger);
    return { path, bytes, pausedMs };
  } finally {
    await rm(copy, { recursive: true, force: true });
  }
}

/**
 * Copies the open database's files into the empty directory `to` as a consistent image: once while
 * it works, then, while no statement runs, again what changed meanwhile. Returns how long
 * statements waited (ms).
 */
export async function copyOpenDatabase(
  files: EmbeddedFiles,
  to: string,
  options: Pick<BackupOptions, "signal" | "betweenCopies"> = {},
): Promise<number> {
  const firstCopyStarted = Date.now();
  await copyTree(files.dataDir, to, options.signal);
  await options.betweenCopies?.();
  options.signal?.throwIfAborted();
  const paused = await files.exclusively(() => {
    const started = performance.now();
    catchUp(files.dataDir, to, firstCopyStarted - CLOCK_SLACK_MS);
    return performance.now() - started;
  });
  return Math.round(paused);
}

/** Removes what a backup killed on its way left in `destDir`: its copy and its unfinished archive. */
export async function removeUnfinishedBackups(destDir: string, logger?: Logger): Promise<void> {
  const names = await readdir(destDir).catch(() => [] as string[]);
  for (const name of names) {
    if (/^\.stavrobot-.*\.(copy|partial)$/.test(name)) {
      await rm(join(destDir, name), { recursive: true, force: true });
      logger?.info(`removed unfinished backup ${name}`);
    }
  }
}

/** The first copy, with the database at work: what changes meanwhile is copied again by catchUp. */
async function copyTree(from: string, to: string, signal?: AbortSignal): Promise<void> {
  const entries = await readdir(from, { withFileTypes: true }).catch(ignoreGone);
  for (const entry of entries ?? []) {
    signal?.throwIfAborted();
    if (SKIPPED.has(entry.name)) continue;
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) {
      await mkdir(target, { mode: 0o700 });
      await copyTree(source, target, signal);
    } else if (entry.isFile()) {
      await copyFile(source, target).catch(ignoreGone);
    }
  }
}

/**
 * The second copy, while nothing writes: every file changed (or created) since `since`, or of
 * another size than its first copy, is copied again, and what the database removed meanwhile is
 * removed. Synchronous: it runs in the short moment statements wait anyway.
 */
function catchUp(from: string, to: string, since: number): void {
  const present = new Set<string>();
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (SKIPPED.has(entry.name)) continue;
    present.add(entry.name);
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    const copied = statOrNothing(target);
    if (entry.isDirectory()) {
      if (!copied?.isDirectory()) {
        rmSync(target, { recursive: true, force: true });
        mkdirSync(target, { mode: 0o700 });
      }
      catchUp(source, target, since);
    } else if (entry.isFile()) {
      const info = lstatSync(source);
      if (!copied?.isFile() || copied.size !== info.size || info.mtimeMs >= since) {
        copyFileSync(source, target);
      }
    }
  }
  for (const name of readdirSync(to)) {
    if (!present.has(name)) rmSync(join(to, name), { recursive: true, force: true });
  }
}

function statOrNothing(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/** A file or directory the database removed between listing and copying it. */
function ignoreGone(error: NodeJS.ErrnoException): undefined {
  if (error.code === "ENOENT") return undefined;
  throw error;
}
