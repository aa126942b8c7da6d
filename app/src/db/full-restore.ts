/**
 * Restores a full backup (full-backup.ts) into a data directory: the embedded database through
 * PGlite (as `npm run restore` of a database backup does), everything else as it was archived.
 * Nothing is replaced without `force`; with it, what is replaced is kept beside it, renamed.
 */
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, readdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { gunzipSync } from "node:zlib";
import { BackupError, restoreEmbeddedTar, type RestoreOptions } from "./backup.js";
import { FULL_BACKUP_FORMAT, FULL_BACKUP_MANIFEST, type FullBackupManifest } from "./full-backup.js";
import { readTar, writeTar, type TarEntry } from "@stavrobot/common";

export interface FullArchive {
  manifest: FullBackupManifest;
  entries: TarEntry[];
}

/**
 * The full backup at `archive`, or undefined when the file is another kind of backup (a database
 * alone: `npm run restore` hands those to restoreEmbedded or pg-restore.sh).
 */
export async function readFullBackup(archive: string): Promise<FullArchive | undefined> {
  const compressed = await readFile(archive).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") throw new BackupError(`no such file: ${archive}`);
    throw error;
  });
  let tar: Uint8Array;
  try {
    tar = gunzipSync(compressed);
  } catch {
    return undefined;
  }
  const entries = readTar(tar);
  const manifestEntry = entries?.find((entry) => entry.name === FULL_BACKUP_MANIFEST);
  if (!entries || !manifestEntry) return undefined;
  let manifest: Partial<FullBackupManifest>;
  try {
    manifest = JSON.parse(Buffer.from(manifestEntry.data).toString("utf8")) as Partial<FullBackupManifest>;
  } catch {
    throw new BackupError(`${archive}: its ${FULL_BACKUP_MANIFEST} is not JSON; the file is damaged`);
  }
  if (manifest.format !== FULL_BACKUP_FORMAT || manifest.version !== 1) {
    throw new BackupError(
      `${archive} is a backup of a format this version cannot restore (${JSON.stringify(manifest.format)} ${JSON.stringify(manifest.version)})`,
    );
  }
  for (const entry of entries) {
    const parts = entry.name.split("/");
    if (entry.name.startsWith("/") || parts.some((part) => part === ".." || part === "")) {
      throw new BackupError(
        `${archive} holds an entry outside its directory (${entry.name}): it is not restored`,
      );
    }
  }
  return { manifest: manifest as FullBackupManifest, entries };
}

/**
 * Restores `full` into `dataDir`. The database goes first (PGlite must accept it), then each other
 * top-level entry (`main`, `plugins`…), built beside its place and renamed into it. Refuses, before
 * anything changes, when one of them is already there, unless `force`.
 */
export async function restoreFullBackup(
  full: FullArchive,
  label: string,
  dataDir: string,
  options: RestoreOptions = {},
): Promise<{ database: boolean; restored: string[] }> {
  const rest = full.entries.filter((entry) => entry.name !== FULL_BACKUP_MANIFEST && !inDatabase(entry));
  const tops = [...new Set(rest.map((entry) => entry.name.split("/")[0] as string))].sort();
  const database = full.entries.some((entry) => entry.name === "pglite/PG_VERSION");
  const present = [];
  for (const top of database ? ["pglite", ...tops] : tops) {
    if (await holdsSomething(join(dataDir, top))) present.push(top);
  }
  if (present.length > 0 && !options.force) {
    throw new BackupError(
      `${dataDir} already holds ${present.join(", ")}; restore into an empty data directory, or pass ` +
        `--force to replace them (each is kept beside it, renamed)`,
    );
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (database) {
    const tar = writeTar(full.entries.filter(inDatabase), (name) => name.slice("pglite/".length));
    await restoreEmbeddedTar(tar, `${label} (its database)`, join(dataDir, "pglite"), options);
  }
  const staging = await mkdtemp(join(dataDir, ".restoring-"));
  try {
    await unpack(rest, staging);
    const stamp = new Date().toISOString().replaceAll(":", "-");
    for (const top of tops) {
      const target = join(dataDir, top);
      if (!present.includes(top)) await rm(target, { recursive: true, force: true });
      else {
        const aside = `${target}.replaced-${stamp}`;
        await rename(target, aside);
        options.logger?.warn(`moved the previous ${top} to ${aside}; delete it once the restore is checked`);
      }
      await rename(join(staging, top), target);
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  options.logger?.info(
    `restored ${label} into ${dataDir}: ${[...(database ? ["the database"] : []), ...tops].join(", ")}`,
  );
  return { database, restored: tops };
}

const inDatabase = (entry: TarEntry): boolean => entry.name === "pglite" || entry.name.startsWith("pglite/");

/**
 * Writes the entries under `root`: directories and files first, links last, so no file is
 * written through a link the archive made.
 */
async function unpack(entries: TarEntry[], root: string): Promise<void> {
  const links: TarEntry[] = [];
  for (const entry of entries) {
    const path = join(root, entry.name);
    if (entry.kind === "link") {
      links.push(entry);
    } else if (entry.kind === "dir") {
      await mkdir(path, { recursive: true, mode: 0o700 });
      await chmod(path, entry.mode | 0o700);
    } else {
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      await writeFile(path, entry.data, { mode: entry.mode });
      await chmod(path, entry.mode);
    }
  }
  for (const entry of links) {
    const path = join(root, entry.name);
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    await symlink(entry.link, path);
  }
}

async function holdsSomething(path: string): Promise<boolean> {
  if (!existsSync(path)) return false;
  const entries = await readdir(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOTDIR") return ["(a file)"];
    throw error;
  });
  return entries.length > 0;
}
