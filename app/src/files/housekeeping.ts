import type { Logger } from "@stavrobot/common";
import type { InboxStore } from "../db/inbox.js";
import type { FileAreas } from "./areas.js";

/** Files older than this are removed (the reference's rule). */
export const FILE_MAX_AGE_MS = 3 * 24 * 60 * 60_000;

/**
 * Removes old uploads, workspace files and tool outputs, never one that a message still waiting
 * in the inbox refers to (it would be missing when its turn runs).
 */
export async function removeOldFiles(
  areas: FileAreas,
  inbox: InboxStore,
  logger: Logger,
  now = Date.now(),
): Promise<number> {
  const keep = new Set<string>();
  for (const entry of await inbox.unfinished()) {
    for (const attachment of entry.payload.attachments) keep.add(attachment.storedPath);
  }
  const removed = await areas.removeOlderThan(FILE_MAX_AGE_MS, keep, now);
  if (removed > 0) logger.info("removed old files", { count: removed });
  return removed;
}
