/**
 * `npm run backup [-- --dir DIR]` and `npm run restore -- ARCHIVE [--force]`.
 *
 * With DATABASE_URL or PG* variables set, the database is a server: these run
 * scripts/pg-backup.sh --once and scripts/pg-restore.sh (pg_dump and psql must be installed).
 * Otherwise they back up or restore the embedded database in $DATA_DIR/pglite; the app must be
 * stopped first. Backups go to --dir, else $BACKUP_DIR, else $DATA_DIR/backups.
 */
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createLogger } from "@stavrobot/common";
import { parseAppEnv } from "../env.js";
import { resolvePaths } from "../paths.js";
import { BackupError, backupEmbedded, restoreEmbedded } from "./backup.js";
import { usesServer } from "./database.js";

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
  const { dataDir } = resolvePaths(parseAppEnv(env));
  if (command === "backup" && archive === undefined && !values.force) {
    const destDir = values.dir
      ? resolve(userCwd, values.dir)
      : resolve(env.BACKUP_DIR ?? join(dataDir, "backups"));
    if (usesServer(env)) return runScript("pg-backup.sh", ["--once"], { BACKUP_DIR: destDir });
    await backupEmbedded(join(dataDir, "pglite"), destDir, new Date(), logger);
    return 0;
  }
  if (command === "restore" && archive !== undefined && extra.length === 0 && values.dir === undefined) {
    const path = resolve(userCwd, archive);
    if (usesServer(env)) return runScript("pg-restore.sh", [...(values.force ? ["--force"] : []), path]);
    await restoreEmbedded(path, join(dataDir, "pglite"), { force: values.force, logger });
    return 0;
  }
  console.error(USAGE);
  return 2;
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
  if (error instanceof BackupError) {
    console.error(error.message);
    process.exitCode = 1;
  } else if (isArgumentError(error)) {
    console.error(`${error.message}\n${USAGE}`);
    process.exitCode = 2;
  } else {
    throw error;
  }
}
