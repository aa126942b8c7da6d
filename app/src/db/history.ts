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
  /** The channels' names: a channel's message in the main agent's conversation is the owner's (routing sends anyone else's to their own agent). */
  channels: readonly string[],
  limit: number,
): Promise<HistoryEntry[]> {
  const result = await db.query<Row>(
    `SELECT id, received_at, source, payload, status, outcome, response FROM inbox
     WHERE COALESCE(payload->>'agentId', '1') = '1'
       AND outcome IS DISTINCT FROM 'notice'
       AND (source IS NULL OR source IN ('cli', 'web', 'cron', 'coder', 'upload', 'agent') OR source LIKE 'cron:%'
            OR source LIKE 'plugin:%'
            OR source = ANY($2::text[]))
     ORDER BY id DESC LIMIT $1`,
    [limit, [...channels]],
  );
  return result.rows.reverse().map((row) => {
    const background = !(
      row.source === null ||
      row.source === "cli" ||
      row.source === "web" ||
      channels.includes(row.source)
    );
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
