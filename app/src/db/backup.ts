/**
 * Backup and restore of the embedded database (PGlite). A backup is PGlite's own tarball of the
 * data directory, gzip-compressed; restoring hands that tarball back to PGlite. The server
 * database is backed up by scripts/pg-backup.sh instead (pg_dump), with the same retention rule.
 *
 * Both open the database themselves, and only one process may open a PGlite data directory, so
 * the app must be stopped while either runs; the running app takes its own backups instead
 * (live-backup.ts), in the same format.
 */
import { existsSync } from "node:fs";
import {
  mkdir,
  mkdtemp,
  open,
  readFile,
  readdir,
  rename,
  rm,
  rmdir,
  type FileHandle,
} from "node:fs/promises";
import { basename, dirname, join, relative, resolve, isAbsolute } from "node:path";
import { gunzipSync } from "node:zlib";
import type { Logger } from "@stavrobot/common";
import { backupName, backupsToDelete } from "./backup-retention.js";
import { tarEntryNames } from "@stavrobot/common";

export const EMBEDDED_BACKUP_SUFFIX = "pglite.tar.gz";

/** A refusal or a bad input, worded for the person running the command. */
export class BackupError extends Error {
  override name = "BackupError";
}

/**
 * Writes `stavrobot-<now>.pglite.tar.gz` (mode 600) into `destDir`, then deletes the backups there
 * that the retention rule no longer keeps. Returns the new backup's path.
 */
export async function backupEmbedded(
  dataDir: string,
  destDir: string,
  now: Date = new Date(),
  logger?: Logger,
): Promise<string> {
  assertNotInUse(dataDir);
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    throw new BackupError(`${dataDir} holds no embedded database to back up`);
  }
  if (isInside(destDir, dataDir)) {
    throw new BackupError(`the backup directory ${destDir} must not be inside the data directory ${dataDir}`);
  }
  const tarball = await dumpDataDir(dataDir);
  await mkdir(destDir, { recursive: true, mode: 0o700 });
  const path = join(destDir, backupName(now, EMBEDDED_BACKUP_SUFFIX));
  await writeAtomically(path, tarball);
  logger?.info(`wrote ${path} (${tarball.length} bytes)`);
  await applyRetention(destDir, now, logger);
  return path;
}

export interface RestoreOptions {
  /** Replace a database already in `dataDir`; the old directory is kept beside it, renamed. */
  force?: boolean;
  logger?: Logger;
}

/**
 * Restores a backupEmbedded() archive into `dataDir`. The database is built in a sibling directory
 * and moved into place only once PGlite has opened it, so a failed restore leaves `dataDir` as it was.
 */
export async function restoreEmbedded(
  archive: string,
  dataDir: string,
  options: RestoreOptions = {},
): Promise<void> {
  await restoreEmbeddedTar(await readArchive(archive), archive, dataDir, options);
}

/** Restores an (uncompressed) tarball of a data directory, as restoreEmbedded does; `label` names it in the log. */
export async function restoreEmbeddedTar(
  tar: Uint8Array,
  label: string,
  dataDir: string,
  options: RestoreOptions = {},
): Promise<void> {
  assertNotInUse(dataDir);
  const existing = await existingContent(dataDir);
  if (existing && !options.force) {
    throw new BackupError(
      `${dataDir} already holds ${existing === "database" ? "a database" : "files"}; ` +
        `restore into an empty directory, or pass --force to replace it (the old one is kept, renamed)`,
    );
  }
  const staging = await mkdtempBeside(dataDir);
  try {
    await loadDataDir(staging, tar);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
  if (existing) {
    const aside = `${dataDir}.replaced-${new Date().toISOString().replaceAll(":", "-")}`;
    await rename(dataDir, aside);
    options.logger?.warn(`moved the previous database to ${aside}; delete it once the restore is checked`);
  } else if (existsSync(dataDir)) {
    await rmdir(dataDir);
  }
  await rename(staging, dataDir);
  options.logger?.info(`restored ${label} into ${dataDir}`);
}

/**
 * PostgreSQL (and so PGlite) keeps `postmaster.pid` in the data directory while a database is
 * open and removes it on a clean close; opening it from a second process would corrupt it.
 */
function assertNotInUse(dataDir: string): void {
  const pidFile = join(dataDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  throw new BackupError(
    `${dataDir} is in use (it holds postmaster.pid): stop the app first, since only one process ` +
      `may open the embedded database. If nothing is using it (the app was killed), start and stop ` +
      `the app once, or delete ${pidFile}.`,
  );
}

async function dumpDataDir(dataDir: string): Promise<Uint8Array> {
  const { PGlite } = await import("@electric-sql/pglite");
  const lite = await PGlite.create(dataDir);
  try {
    const blob = await lite.dumpDataDir("gzip");
    return new Uint8Array(await blob.arrayBuffer());
  } finally {
    await lite.close();
  }
}

/** PGlite unpacks the (uncompressed) tarball into an empty directory when it opens it. */
async function loadDataDir(dataDir: string, tar: Uint8Array): Promise<void> {
  const { PGlite } = await import("@electric-sql/pglite");
  const loadDataDir = new Blob([tar], { type: "application/x-tar" });
  const lite = await PGlite.create(dataDir, { loadDataDir });
  try {
    await lite.query("SELECT 1");
  } finally {
    await lite.close();
  }
}

/**
 * The archive, decompressed and checked to be a whole tarball of a data directory. Checked here
 * because PGlite, given a damaged one, fails with an unhandled rejection that kills the process.
 */
async function readArchive(archive: string): Promise<Uint8Array> {
  const compressed = await readFile(archive).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") throw new BackupError(`no such file: ${archive}`);
    throw error;
  });
  const notBackup = `${archive} is not an embedded-database backup (a gzip-compressed tarball of the data directory)`;
  let tar: Uint8Array;
  try {
    tar = gunzipSync(compressed);
  } catch {
    throw new BackupError(`${notBackup}, or it is damaged or incomplete`);
  }
  const names = tarEntryNames(tar);
  if (!names?.some((name) => name.replace(/^\.?\//, "") === "PG_VERSION")) {
    throw new BackupError(`${notBackup}, or it is damaged or incomplete`);
  }
  return tar;
}

async function existingContent(dataDir: string): Promise<"database" | "files" | undefined> {
  if (existsSync(join(dataDir, "PG_VERSION"))) return "database";
  const entries = await readdir(dataDir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw error;
  });
  return entries.length > 0 ? "files" : undefined;
}

/** A new directory next to `dir`, on the same filesystem so that rename() can move it into place. */
async function mkdtempBeside(dir: string): Promise<string> {
  const parent = dirname(resolve(dir));
  await mkdir(parent, { recursive: true });
  return mkdtemp(join(parent, `.${basename(dir)}.restoring-`));
}

/**
 * Written under a temporary name (mode 600) and renamed, so a crash never leaves a half-written
 * backup under a backup's name. `data` is the contents, or a function writing them to the file.
 * Returns the size written.
 */
export async function writeAtomically(
  path: string,
  data: Uint8Array | ((file: FileHandle) => Promise<void>),
): Promise<number> {
  const partial = join(dirname(path), `.${basename(path)}.partial`);
  await rm(partial, { force: true });
  const file = await open(partial, "wx", 0o600);
  try {
    if (data instanceof Uint8Array) await file.writeFile(data);
    else await data(file);
    await file.sync();
    const { size } = await file.stat();
    await file.close();
    await rename(partial, path);
    return size;
  } catch (error) {
    await file.close().catch(() => {});
    await rm(partial, { force: true });
    throw error;
  }
}

/** Deletes the backups in `destDir` that the retention rule no longer keeps at `now`. */
export async function applyRetention(destDir: string, now: Date, logger?: Logger): Promise<void> {
  for (const name of backupsToDelete(await readdir(destDir), now)) {
    await rm(join(destDir, name), { force: true });
    logger?.info(`deleted old backup ${name}`);
  }
}

export function isInside(child: string, parent: string): boolean {
  const path = relative(resolve(parent), resolve(child));
  return path === "" || (!path.startsWith("..") && !isAbsolute(path));
}
