import { DomainError, errorMessage, type Handler } from "@stavrobot/common";
import type { LiveBackup } from "../db/live-backup.js";

/**
 * `POST /backup` (internal: `npm run backup` while the app runs): a backup of the embedded
 * database now, answered with where it went. The caller holds the internal secret, so it is told
 * why one failed.
 */
export function createBackupHandler(backup: (() => Promise<LiveBackup>) | undefined): Handler {
  return async () => {
    if (!backup) {
      throw new DomainError(
        "conflict",
        "This app runs on a PostgreSQL server, not the embedded database: npm run backup uses pg_dump for it.",
      );
    }
    try {
      return { json: await backup() };
    } catch (error) {
      throw new DomainError("failed", `The backup failed: ${errorMessage(error)}`);
    }
  };
}
