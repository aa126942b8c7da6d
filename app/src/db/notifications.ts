import { sanitizeText } from "@stavrobot/common";
import type { Queryable } from "./database.js";

/** An answer kept for the owner, listed on every page until they dismiss it. */
export interface OwnerNotification {
  /** The inbox entry it answers. */
  id: number;
  source: string | null;
  /** In the owner's words: a reminder's note, a plugin's tool, what a notice is about. */
  title: string;
  response: string;
  /** The turn failed: `response` is its error. */
  failed: boolean;
  /** When it was kept (ISO 8601). */
  at: string;
}

/** At most this many are listed (the newest). */
export const NOTIFICATION_LIST_LIMIT = 50;
const TITLE_CHARS = 200;

interface Row {
  id: number;
  source: string | null;
  title: string;
  response: string | null;
  outcome: string | null;
  created_at: Date | string;
}

/**
 * The owner's notifications: a row per kept answer (`inbox_id`), open until dismissed. The answer's
 * text stays in the inbox; a row only says that it is the owner's to see and how to name it.
 */
export class NotificationStore {
  constructor(private readonly db: Queryable) {}

  /** Lists this answer until the owner dismisses it; keeping one twice changes nothing. */
  async keep(inboxId: number, title: string): Promise<void> {
    await this.db.query(
      "INSERT INTO notifications (inbox_id, title) VALUES ($1, $2) ON CONFLICT (inbox_id) DO NOTHING",
      [inboxId, sanitizeText(title).slice(0, TITLE_CHARS)],
    );
  }

  /** The ones not dismissed, newest first. */
  async open(limit = NOTIFICATION_LIST_LIMIT): Promise<OwnerNotification[]> {
    const result = await this.db.query<Row>(
      `SELECT n.inbox_id AS id, i.source, n.title, i.response, i.outcome, n.created_at
       FROM notifications n JOIN inbox i ON i.id = n.inbox_id
       WHERE n.dismissed_at IS NULL
       ORDER BY n.inbox_id DESC LIMIT $1`,
      [limit],
    );
    return result.rows.map((row) => ({
      id: row.id,
      source: row.source,
      title: row.title,
      response: row.response ?? "",
      failed: row.outcome === "error",
      at: new Date(row.created_at).toISOString(),
    }));
  }

  /** Dismisses these (ids not listed, or dismissed already, are left alone); returns the ones dismissed now. */
  async dismiss(ids: number[]): Promise<number[]> {
    if (ids.length === 0) return [];
    const result = await this.db.query<{ inbox_id: number }>(
      `UPDATE notifications SET dismissed_at = now()
       WHERE inbox_id = ANY($1::int[]) AND dismissed_at IS NULL RETURNING inbox_id`,
      [ids],
    );
    return result.rows.map((row) => row.inbox_id).sort((a, b) => a - b);
  }
}
