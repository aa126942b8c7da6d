import { dirname, join, resolve } from "node:path";
import { MCP_SERVERS_FILE } from "@stavrobot/common";
import type { AppEnv } from "./env.js";

export interface AppPaths {
  dataDir: string;
  configPath: string;
  secretFile: string;
  /** The owner's MCP servers as handed to the plugin-runner: MCP_SERVERS_FILE, else beside the secret. */
  mcpServersFile: string;
  /** Files the model may hand to plugins: uploads and plugin outputs live here. */
  filesDir: string;
  uploadsDir: string;
  /** Deliveries' own copies of attachments waiting to be sent (`outbox/`: the name installs already have). */
  deliveryFilesDir: string;
  /** Backups: BACKUP_DIR, else `$DATA_DIR/backups`. */
  backupDir: string;
  /** The installed skills' files (`skills/<name>/`), outside every area the model's tools reach. */
  skillsDir: string;
}

/**
 * Where everything lives, from DATA_DIR, CONFIG_PATH, STAVROBOT_INTERNAL_SECRET_FILE,
 * MCP_SERVERS_FILE and BACKUP_DIR.
 */
export function resolvePaths(
  env: Pick<
    AppEnv,
    "DATA_DIR" | "CONFIG_PATH" | "STAVROBOT_INTERNAL_SECRET_FILE" | "MCP_SERVERS_FILE" | "BACKUP_DIR"
  >,
): AppPaths {
  const dataDir = resolve(env.DATA_DIR);
  const configPath = resolve(env.CONFIG_PATH ?? join(dataDir, "main", "config.toml"));
  const filesDir = join(dataDir, "files");
  const secretFile = resolve(
    env.STAVROBOT_INTERNAL_SECRET_FILE ?? join(dirname(configPath), "internal-secret"),
  );
  return {
    dataDir,
    configPath,
    secretFile,
    mcpServersFile: resolve(env.MCP_SERVERS_FILE ?? join(dirname(secretFile), MCP_SERVERS_FILE)),
    filesDir,
    uploadsDir: join(filesDir, "uploads"),
    deliveryFilesDir: join(dataDir, "outbox"),
    backupDir: resolve(env.BACKUP_DIR ?? join(dataDir, "backups")),
    skillsDir: join(dataDir, "skills"),
  };
}
