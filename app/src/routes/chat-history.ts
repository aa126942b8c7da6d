import { badRequest, type Router } from "@stavrobot/common";
import { CHANNEL_SOURCES } from "../audience.js";
import type { Queryable } from "../db/database.js";
import { ownerHistory } from "../db/history.js";

const DEFAULT_LIMIT = 30;
const MAX_LIMIT = 100;

/**
 * `GET /api/chat/history?limit=` (owner's password): the latest exchanges of the owner's own
 * conversation, oldest first (`{entries}`, see `HistoryEntry`), so the web chat shows them again
 * after a reload. `limit` is 1–100 (default 30).
 */
export function addChatHistoryRoutes(router: Router, deps: { db: Queryable }): void {
  router.get("/api/chat/history", async ({ url }) => {
    const raw = url.searchParams.get("limit") ?? String(DEFAULT_LIMIT);
    const limit = /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
    if (!(limit >= 1 && limit <= MAX_LIMIT))
      throw badRequest(`'limit' must be an integer from 1 to ${MAX_LIMIT}`);
    return { json: { entries: await ownerHistory(deps.db, CHANNEL_SOURCES, limit) } };
  });
}
