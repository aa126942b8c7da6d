import type { Queryable } from "./database.js";
import type { Attachment } from "@stavrobot/common";

/** What is kept of an accepted message: files are already on disk, referenced as attachments. */
export interface InboxPayload {
  message?: string | undefined;
  attachments: Attachment[];
}

export type InboxStatus = "pending" | "processing" | "steered" | "done" | "failed";

export interface InboxEntry {
  id: number;
  receivedAt: Date;
  source: string | null;
  sender: string | null;
  payload: InboxPayload;
  status: InboxStatus;
  attempts: number;
}

interface InboxRow {
  id: number;
  received_at: Date;
  source: string | null;
  sender: string | null;
  payload: InboxPayload;
  status: InboxStatus;
  attempts: number;
}

const columns = "id, received_at, source, sender, payload, status, attempts";

function toEntry(row: InboxRow): InboxEntry {
  return {
    id: row.id,
    receivedAt: new Date(row.received_at),
    source: row.source,
    sender: row.sender,
    payload: row.payload,
    status: row.status,
    attempts: row.attempts,
  };
}

/** Durable record of accepted messages: written before a message is acknowledged. */
export class InboxStore {
  constructor(private readonly db: Queryable) {}

  /**
   * Saves a new message. With an idempotency key already seen, nothing is saved and the earlier
   * entry is returned with `duplicate: true`.
   */
  async add(
    source: string | null,
    sender: string | null,
    payload: InboxPayload,
    idempotencyKey?: string,
  ): Promise<{ entry: InboxEntry; duplicate: boolean }> {
    const result = await this.db.query<InboxRow>(
      `INSERT INTO inbox (source, sender, payload, idempotency_key) VALUES ($1, $2, $3, $4)
       ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING ${columns}`,
      [source, sender, JSON.stringify(payload), idempotencyKey ?? null],
    );
    const row = result.rows[0];
    if (row) return { entry: toEntry(row), duplicate: false };
    const existing = await this.db.query<InboxRow>(
      `SELECT ${columns} FROM inbox WHERE idempotency_key = $1`,
      [idempotencyKey],
    );
    return { entry: toEntry(existing.rows[0] as InboxRow), duplicate: true };
  }

  /** Back to waiting for its own turn, and its reply not yet seen by anyone. */
  async markPending(id: number): Promise<void> {
    await this.db.query("UPDATE inbox SET status = 'pending', delivered = false WHERE id = $1", [id]);
  }

  async markProcessing(id: number): Promise<void> {
    await this.db.query("UPDATE inbox SET status = 'processing', attempts = attempts + 1 WHERE id = $1", [
      id,
    ]);
  }

  async markSteered(id: number): Promise<void> {
    await this.db.query("UPDATE inbox SET status = 'steered' WHERE id = $1", [id]);
  }

  async finish(
    id: number,
    status: "done" | "failed",
    response: string,
    error?: string,
    delivered = false,
  ): Promise<void> {
    await this.db.query(
      `UPDATE inbox SET status = $2, response = $3, error = $4, finished_at = now(), delivered = delivered OR $5
       WHERE id = $1`,
      [id, status, response, error ?? null, delivered],
    );
  }

  async markDelivered(ids: number[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db.query("UPDATE inbox SET delivered = true WHERE id = ANY($1::int[])", [ids]);
  }

  /** Messages accepted but not finished, oldest first (to resume after a restart). */
  async unfinished(): Promise<InboxEntry[]> {
    const result = await this.db.query<InboxRow>(
      `SELECT ${columns} FROM inbox WHERE status IN ('pending', 'processing', 'steered') ORDER BY id`,
    );
    return result.rows.map(toEntry);
  }

  /** Finished replies that no waiting client received (e.g. the app restarted mid-turn). */
  async undelivered(
    source: string | null,
    beforeId: number,
  ): Promise<{ id: number; message: string; response: string }[]> {
    const result = await this.db.query<{ id: number; payload: InboxPayload; response: string }>(
      `SELECT id, payload, response FROM inbox
       WHERE status IN ('done', 'failed') AND NOT delivered AND id < $2
         AND source IS NOT DISTINCT FROM $1 AND response IS NOT NULL
       ORDER BY id`,
      [source, beforeId],
    );
    return result.rows.map((row) => ({
      id: row.id,
      message: row.payload.message ?? "",
      response: row.response,
    }));
  }
}
