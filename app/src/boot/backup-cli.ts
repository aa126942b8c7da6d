/**
 * `npm run backup [-- --dir DIR]` and `npm run restore -- ARCHIVE [--force]`.
 *
 * With DATABASE_URL or PG* variables set, the database is a server: these run
 * scripts/pg-backup.sh --once and scripts/pg-restore.sh (pg_dump and psql must be installed).
 * Otherwise they back up or restore the embedded database in $DATA_DIR/pglite. While the app runs
 * there, a backup is asked of it (it takes it without stopping) and a restore is refused; while
 * it is stopped, both hold the data directory's lock, so it cannot start meanwhile. Backups go to
 * --dir, else $BACKUP_DIR, else $DATA_DIR/backups.
 *
 * A full backup (the Settings page's download, db/full-backup.ts) is recognised by its manifest
 * and restored whole into $DATA_DIR, whichever database this machine uses.
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  ConfigError,
  StartRefused,
  createLogger,
  errorMessage,
  resolveInternalSecret,
} from "@stavrobot/common";
import { parseAppEnv } from "./env.js";
import { resolvePaths, type AppPaths } from "./paths.js";
import { readFullBackup, restoreFullBackup, type FullArchive } from "../db/full-restore.js";
import { BackupError, backupEmbedded, restoreEmbedded } from "../db/backup.js";
import { usesServer } from "../db/database.js";
import { acquireInstanceLock, runningInstance, type InstanceRecord } from "./instance-lock.js";

const USAGE = "usage: npm run backup [-- --dir DIR]  |  npm run restore -- ARCHIVE [--force]";
const scriptsDir = fileURLToPath(new URL("../../../scripts/", import.meta.url));
const env = process.env;
const logger = createLogger("backup");
/** npm runs scripts from the repository root; paths typed by the user are relative to where they were. */
const userCwd = env.INIT_CWD ?? process.cwd();

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { dir: { type: "string" }, force: { type: "boolean", default: false } },
  });
  const [command, archive, ...extra] = positionals;
  const paths = resolvePaths(parseAppEnv(env));
  const pgliteDir = join(paths.dataDir, "pglite");
  if (command === "backup" && archive === undefined && !values.force) {
    const destDir = values.dir ? resolve(userCwd, values.dir) : paths.backupDir;
    if (usesServer(env)) return runScript("pg-backup.sh", ["--once"], { BACKUP_DIR: destDir });
    const running = runningInstance(paths.dataDir);
    if (running) {
      if (values.dir !== undefined) {
        throw new BackupError(
          `The app (pid ${running.pid}) is running on ${paths.dataDir}, so it takes the backup itself, ` +
            `into its BACKUP_DIR: run npm run backup without --dir, or stop the app first.`,
        );
      }
      return askRunningApp(running, resolveInternalSecret({ env, file: paths.secretFile, create: false }));
    }
    await whileLocked(paths.dataDir, () => backupEmbedded(pgliteDir, destDir, new Date(), logger));
    return 0;
  }
  if (command === "restore" && archive !== undefined && extra.length === 0 && values.dir === undefined) {
    const path = resolve(userCwd, archive);
    const full = await readFullBackup(path);
    if (full) return restoreFull(full, path, paths, values.force);
    if (usesServer(env)) return runScript("pg-restore.sh", [...(values.force ? ["--force"] : []), path]);
    await whileLocked(paths.dataDir, () => restoreEmbedded(path, pgliteDir, { force: values.force, logger }));
    return 0;
  }
  console.error(USAGE);
  return 2;
}

/** A full backup (the Settings page's download): the whole data directory, its database included. */
async function restoreFull(
  full: FullArchive,
  path: string,
  paths: AppPaths,
  force: boolean,
): Promise<number> {
  const { database } = await whileLocked(paths.dataDir, () =>
    restoreFullBackup(full, path, paths.dataDir, { force, logger }),
  );
  if (!database) {
    logger.warn(
      "this backup holds no database (it was taken on a PostgreSQL server): restore the server's own " +
        "backup with npm run restore -- <file>.sql.gz",
    );
  } else if (usesServer(env)) {
    logger.warn(
      `the backup's embedded database went to ${join(paths.dataDir, "pglite")}, but DATABASE_URL (or PG*) ` +
        "is set: the app uses that server instead until it is unset",
    );
  }
  const defaultConfig = join(paths.dataDir, "main", "config.toml");
  if (paths.configPath !== defaultConfig) {
    logger.warn(
      `the backup's config.toml went to ${defaultConfig}; CONFIG_PATH points at ${paths.configPath}`,
    );
  }
  return 0;
}

/**
 * Runs `step` holding the data directory's lock, so the app cannot start on the database while
 * it is backed up or replaced; refuses while an app runs there.
 */
async function whileLocked<T>(dataDir: string, step: () => Promise<T>): Promise<T> {
  let lock;
  try {
    lock = await acquireInstanceLock(dataDir);
  } catch (error) {
    if (error instanceof StartRefused) throw new BackupError(error.message);
    throw error;
  }
  try {
    return await step();
  } finally {
    lock.release();
  }
}

/** `POST /backup` to the app running on this data directory: it takes the backup while it runs. */
async function askRunningApp(running: InstanceRecord, secret: string): Promise<number> {
  if (running.internalPort === undefined) {
    throw new BackupError(`The app (pid ${running.pid}) is still starting: try again in a moment.`);
  }
  const host =
    !running.internalHost || /^(0\.0\.0\.0|::)$/.test(running.internalHost)
      ? "127.0.0.1"
      : running.internalHost;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${running.internalPort}/backup`;
  logger.info(`the app (pid ${running.pid}) is running: asking it for the backup`);
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: { Authorization: `Bearer ${secret}` },
      signal: AbortSignal.timeout(30 * 60_000),
    });
  } catch (error) {
    throw new BackupError(
      `Could not reach the running app (pid ${running.pid}) at ${url}: ${errorMessage(error)}`,
    );
  }
  const body = (await response.json().catch(() => ({}))) as { path?: string; bytes?: number; error?: string };
  if (!response.ok) throw new BackupError(body.error ?? `The running app answered HTTP ${response.status}`);
  logger.info(`wrote ${body.path} (${body.bytes} bytes)`);
  return 0;
}

/** The server path is the shell scripts', so the CLI and the pg-backup container behave the same. */
function runScript(name: string, args: string[], extraEnv: Record<string, string> = {}): number {
  const result = spawnSync(join(scriptsDir, name), args, { stdio: "inherit", env: { ...env, ...extraEnv } });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

/** parseArgs rejects unknown options and missing values with a coded TypeError. */
function isArgumentError(error: unknown): error is TypeError {
  return error instanceof TypeError && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS");
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  // A refusal or a bad argument: the message says it all. Anything else is a bug: let it propagate.
  if (error instanceof BackupError || error instanceof ConfigError) {
    console.error(error.message);
    process.exitCode = 1;
  } else if (isArgumentError(error)) {
    console.error(`${error.message}\n${USAGE}`);
    process.exitCode = 2;
  } else {
    throw error;
  }
}
