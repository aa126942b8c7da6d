import { createReadStream } from "node:fs";
import { rm } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import {
  DomainError,
  SerialLock,
  errorMessage,
  type Handler,
  type Logger,
  type Reply,
  type Router,
} from "@stavrobot/common";
import { escapeHtml } from "../html.js";
import { writeFullBackup, type FullBackup, type FullBackupSources } from "../db/full-backup.js";
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

export interface FullBackupRouteDeps {
  sources: FullBackupSources;
  logger: Logger;
}

const SERVER_NOTE =
  "The database is on a PostgreSQL server, so it is not in this file: its backups are pg_dump's " +
  "(compose's pg-backup service, or npm run backup), restored with npm run restore -- <file>.sql.gz. " +
  "This file holds everything else the app keeps.";

/**
 * `GET /api/backup` (what the Settings page's download holds) and `GET /api/backup/download` (the
 * owner's password): a full backup taken now, sent as a file and then removed. The download is
 * refused to another site's page (`Sec-Fetch-Site`): a GET with the owner's cached password must
 * not let any page make the app archive its data.
 */
export function addFullBackupRoutes(router: Router, deps: FullBackupRouteDeps): void {
  const embedded = deps.sources.database !== undefined;
  const taking = new SerialLock();
  router
    .get("/api/backup", async () => ({
      json: { database: embedded ? "embedded" : "server", ...(embedded ? {} : { note: SERVER_NOTE }) },
    }))
    .get("/api/backup/download", async ({ req, res }) => {
      const site = req.headers["sec-fetch-site"];
      if (site !== undefined && site !== "same-origin" && site !== "none") {
        throw new DomainError("forbidden", "A backup is downloaded from this site's own Settings page.");
      }
      let backup: FullBackup;
      try {
        backup = await taking.run(() => writeFullBackup(deps.sources, new Date(), { logger: deps.logger }));
      } catch (error) {
        deps.logger.error("the full backup failed", { error: errorMessage(error) });
        const message = `The backup failed: ${errorMessage(error)}`;
        // The Settings page's link is a navigation: the person sees why on a page, not a JSON file.
        if (req.headers["sec-fetch-dest"] === "document") return failurePage(message);
        throw new DomainError("failed", message);
      }
      res.writeHead(200, {
        "Content-Type": "application/gzip",
        "Content-Length": String(backup.bytes),
        "Content-Disposition": `attachment; filename="${backup.name}"`,
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
      });
      try {
        await pipeline(createReadStream(backup.path), res);
      } catch (error) {
        deps.logger.warn("the backup's download stopped", { error: errorMessage(error) });
      } finally {
        await rm(backup.path, { force: true });
      }
      return undefined;
    });
}

/** What a failed backup shows where the browser went to download it. */
function failurePage(message: string): Reply {
  return {
    status: 500,
    headers: { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" },
    body:
      '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" ' +
      'content="width=device-width, initial-scale=1"><title>Backup failed</title></head><body>' +
      `<h1>The backup was not made</h1><p id="backup-failed">${escapeHtml(message)}</p>` +
      '<p>Nothing was downloaded. Fix what it says and try again; <a href="/settings">back to Settings</a>.</p>' +
      "</body></html>",
  };
}
