/**
 * A full backup, taken while the app runs: one gzip-compressed tarball laid out as the data
 * directory is, holding everything needed to set the assistant up again: the embedded database
 * (a consistent copy, see live-backup.ts), config.toml, the internal secret, the subscription
 * logins, the plugins with their settings and state, stored files and channel state. What can be
 * made again (caches, earlier backups, the instance lock, runs' scratch directories) stays out.
 * `npm run restore` takes it (full-restore.ts).
 */
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile, rm, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import {
  STATE_ARCHIVE_PATH,
  errorMessage,
  tarEnd,
  tarFile,
  tarTree,
  type Logger,
  type ServiceClient,
} from "@stavrobot/common";
import { backupName } from "./backup-retention.js";
import { isInside } from "./backup.js";
import type { EmbeddedFiles } from "./database.js";
import { copyOpenDatabase } from "./live-backup.js";

/** The file at the archive's root that says what it is. */
export const FULL_BACKUP_MANIFEST = "stavrobot-backup.json";
export const FULL_BACKUP_FORMAT = "stavrobot-full";

export interface FullBackupManifest {
  format: typeof FULL_BACKUP_FORMAT;
  version: 1;
  createdAt: string;
  /** `embedded`: the database is in `pglite/`; `server`: it is not in the archive (pg_dump has it). */
  database: "embedded" | "server";
}

export interface FullBackupSources {
  dataDir: string;
  configPath: string;
  secretFile: string;
  /** Where the archive is built; left out of it. */
  backupDir: string;
  /** The open embedded database, or undefined on a PostgreSQL server. */
  database: EmbeddedFiles | undefined;
  /**
   * The services whose state is kept under these top-level names. A service none of whose names
   * the data directory holds (compose: each keeps its own volumes) is asked for it
   * (`GET /state-archive`); one that does not answer fails the backup rather than leave it out.
   */
  siblings?: { name: string; client: ServiceClient; parts: string[] }[];
}

/** Top-level names of the data directory that are not kept: made again, or not this install's state. */
const LEFT_OUT = new Set(["pglite", "cache", "backups", "instance.lock", "python-runner", "db-backups"]);
const leftOutName = (name: string): boolean =>
  LEFT_OUT.has(name) || name.startsWith("pglite.replaced-") || name.startsWith(".");

export interface FullBackup {
  /** The archive, a temporary file in the backup directory: the caller sends it, then removes it. */
  path: string;
  /** The name to give it where it is downloaded. */
  name: string;
  bytes: number;
}

/**
 * Writes the full archive as `.stavrobot-full-<now>Z.tar.gz.partial` in the backup directory (a
 * name the next start removes, should the app die meanwhile) and returns it.
 */
export async function writeFullBackup(
  sources: FullBackupSources,
  now: Date,
  options: { logger?: Logger; signal?: AbortSignal } = {},
): Promise<FullBackup> {
  const { dataDir, backupDir, database } = sources;
  await mkdir(backupDir, { recursive: true, mode: 0o700 });
  const name = backupName(now, "tar.gz").replace(/^stavrobot-/, "stavrobot-full-");
  const path = join(backupDir, `.${name}.partial`);
  const copy = join(backupDir, `.${name}.copy`);
  await rm(copy, { recursive: true, force: true });
  await mkdir(copy, { mode: 0o700 });
  try {
    const pausedMs = database ? await copyOpenDatabase(database, copy, options) : 0;
    const manifest: FullBackupManifest = {
      format: FULL_BACKUP_FORMAT,
      version: 1,
      createdAt: now.toISOString(),
      database: database ? "embedded" : "server",
    };
    // The backup directory, when it is inside the data directory, is not backed up again.
    const backupsInside = isInside(backupDir, dataDir) ? relative(dataDir, backupDir) : undefined;
    const skip = (entry: string) => (!entry.includes("/") && leftOutName(entry)) || entry === backupsInside;
    const outside = await filesOutside(sources);
    const asked = (sources.siblings ?? []).filter(
      (sibling) => !sibling.parts.some((part) => existsSync(join(dataDir, part))),
    );
    async function* archive(): AsyncGenerator<Uint8Array> {
      yield tarFile(FULL_BACKUP_MANIFEST, Buffer.from(JSON.stringify(manifest, null, 2) + "\n"));
      if (database) yield* tarTree(copy, { prefix: "pglite" });
      yield* tarTree(dataDir, { skip, modes: "kept" });
      for (const [entry, data] of outside) yield tarFile(entry, data);
      for (const sibling of asked) yield* siblingState(sibling, options.signal);
      yield tarEnd();
    }
    await pipeline(
      Readable.from(archive()),
      createGzip(),
      createWriteStream(path, { mode: 0o600, flags: "w" }),
      {
        signal: options.signal,
      },
    );
    const { size: bytes } = await stat(path);
    options.logger?.info(`wrote a full backup (${bytes} bytes; statements waited ${pausedMs} ms)`);
    return { path, name, bytes };
  } catch (error) {
    await rm(path, { force: true });
    throw error;
  } finally {
    await rm(copy, { recursive: true, force: true });
  }
}

const END_BYTES = 1024;

/** A sibling's state archive, its entries passed on as they arrive and its end checked. */
async function* siblingState(
  sibling: { name: string; client: ServiceClient },
  signal: AbortSignal | undefined,
): AsyncGenerator<Uint8Array> {
  let stream: ReadableStream<Uint8Array>;
  try {
    stream = await sibling.client.download(STATE_ARCHIVE_PATH, signal ? { signal } : {});
  } catch (error) {
    throw new Error(`${sibling.name} did not send its state (${errorMessage(error)})`, { cause: error });
  }
  // The last two blocks are the archive's end: held back, since this archive goes on after them.
  let held: Buffer = Buffer.alloc(0);
  for await (const chunk of stream) {
    held = Buffer.concat([held, chunk]);
    if (held.length > END_BYTES) {
      yield held.subarray(0, held.length - END_BYTES);
      held = Buffer.from(held.subarray(held.length - END_BYTES));
    }
  }
  if (held.length !== END_BYTES || held.some((byte) => byte !== 0))
    throw new Error(`${sibling.name}'s state came cut short`);
}

/**
 * config.toml and the internal secret where they live outside the data directory (CONFIG_PATH,
 * STAVROBOT_INTERNAL_SECRET_FILE), put where they are by default: `main/config.toml`,
 * `main/internal-secret`.
 */
async function filesOutside(sources: FullBackupSources): Promise<[string, Uint8Array][]> {
  const files: [string, Uint8Array][] = [];
  for (const [path, entry] of [
    [sources.configPath, "main/config.toml"],
    [sources.secretFile, "main/internal-secret"],
  ] as const) {
    if (isInside(path, sources.dataDir) || !existsSync(path) || existsSync(join(sources.dataDir, entry)))
      continue;
    files.push([entry, await readFile(path)]);
  }
  return files;
}
