import type { OwnerContact } from "../audience.js";
import { notificationTitle } from "../delivery/titles.js";
import type { Queryable } from "./database.js";
import type { InboxOutcome, InboxPayload, InboxStatus } from "./inbox.js";

/** One exchange of the owner's conversation, as the web chat shows it after a reload. */
export interface HistoryEntry {
  id: number;
  /** When the message was received (ISO 8601). */
  at: string;
  source: string | null;
  /** "owner": the owner wrote it; "background": a reminder, a plugin's result, the coder, … */
  from: "owner" | "background";
  /** What the owner wrote; for a background one, its title in the owner's words. */
  text: string;
  /** Files the owner sent with it. */
  attachments: number;
  /** The answer; null while the turn has not finished, or when it joined a running turn. */
  response: string | null;
  failed: boolean;
}

interface Row {
  id: number;
  received_at: Date | string;
  source: string | null;
  payload: InboxPayload;
  status: InboxStatus;
  outcome: InboxOutcome | null;
  response: string | null;
}

/**
 * The latest exchanges of the owner's own conversation (the main agent's), oldest first: what the
 * owner wrote on a console or from their own Telegram or Signal identity, and the turns no person
 * started (reminders, plugins' results, the coder, uploads, a subagent writing to the main agent).
 * Never another person's messages, a subagent's conversation, or a notice that answers nothing.
 */
export async function ownerHistory(
  db: Queryable,
  owner: OwnerContact,
  limit: number,
): Promise<HistoryEntry[]> {
  const result = await db.query<Row>(
    `SELECT id, received_at, source, payload, status, outcome, response FROM inbox
     WHERE COALESCE(payload->>'agentId', '1') = '1'
       AND outcome IS DISTINCT FROM 'notice'
       AND (source IS NULL OR source IN ('cli', 'web', 'cron', 'coder', 'upload', 'agent') OR source LIKE 'cron:%'
            OR source LIKE 'plugin:%'
            OR (source = 'telegram' AND sender = $2) OR (source = 'signal' AND sender = $3))
     ORDER BY id DESC LIMIT $1`,
    [limit, owner.telegram ?? null, owner.signal ?? null],
  );
  return result.rows.reverse().map((row) => {
    const background = !(row.source === null || ["cli", "web", "telegram", "signal"].includes(row.source));
    const finished = row.status === "done" || row.status === "failed";
    return {
      id: row.id,
      at: new Date(row.received_at).toISOString(),
      source: row.source,
      from: background ? "background" : "owner",
      text: background
        ? notificationTitle({ source: row.source, payload: row.payload })
        : (row.payload.message ?? ""),
      attachments: background ? 0 : (row.payload.attachments?.length ?? 0),
      response: finished && row.outcome !== "steered" ? row.response : null,
      failed: row.outcome === "error",
    };
  });
}
