import { existsSync } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import type { Logger } from "@stavrobot/common";
import { openDatabase, usesServer, type Database } from "../db/database.js";
import type { Cleanup } from "./cleanup.js";
import type { AppPaths } from "./paths.js";
import { securePrivateState } from "./private-state.js";

/**
 * The owner's state made private (the config, the secret, stored files, the deliveries' copies and
 * the embedded database: mode 700/600, existing installs included) and the database opened: a
 * server when one is configured, else the embedded PGlite under `$DATA_DIR/pglite`. Closed by
 * `cleanup` after everything added later.
 */
export async function openState(options: {
  env: NodeJS.ProcessEnv;
  paths: AppPaths;
  cleanup: Cleanup;
  logger: Logger;
}): Promise<Database> {
  const { env, paths, cleanup, logger } = options;
  const { dataDir, configPath, secretFile, filesDir, uploadsDir, deliveryFilesDir } = paths;
  const pgliteDir = join(dataDir, "pglite");
  const embedded = !usesServer(env);
  const configDir = dirname(configPath);
  securePrivateState({
    dirs: [
      filesDir,
      uploadsDir,
      deliveryFilesDir,
      ...(isInside(dataDir, configDir) ? [configDir] : []),
      ...(embedded ? [pgliteDir] : []),
    ],
    // Stored files and the deliveries' copies are private wherever they came from (older installs too).
    trees: [filesDir, deliveryFilesDir, ...(embedded ? [pgliteDir] : [])],
    files: [configPath, secretFile],
  });
  const created = embedded && !existsSync(join(pgliteDir, "PG_VERSION"));
  const db = await openDatabase({ env, dataDir: pgliteDir, logger });
  // PGlite writes the files of a database it creates with mode 666 whatever the umask (files it
  // creates later follow the umask): owner-only at once, not only behind their 700 directory.
  if (created) securePrivateState({ dirs: [], trees: [pgliteDir], files: [] });
  // PGlite creates a few files at run time with modes of its own (inside the 700 directory, so
  // unreachable by others); they are made owner-only again once it has closed.
  cleanup.add(async () => {
    await db.close();
    if (embedded) securePrivateState({ dirs: [], trees: [pgliteDir], files: [] });
  });
  return db;
}

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel);
}
