import { sanitizeDeep } from "@stavrobot/common";
import type { Channel } from "../audience.js";
import type { Queryable } from "../db/database.js";

export type { Channel } from "../audience.js";

/** What one delivery sends: text (already in the channel's format) and/or one file. */
export interface DeliveryPayload {
  text?: string;
  /** The deliveries' own copy of the file (taken when the message was queued; removed once settled). */
  attachmentPath?: string;
  /** The file name the recipient sees. */
  attachmentName?: string;
  /** "html": Telegram HTML (`parse_mode: "HTML"`); "markdown": the bridge converts it (Signal). */
  format?: "html" | "markdown" | "plain";
}

export interface Delivery {
  id: number;
  channel: Channel;
  recipient: string;
  payload: DeliveryPayload;
  idempotencyKey: string;
  attempts: number;
  inboxId: number | null;
}

interface Row {
  id: number;
  channel: Channel;
  recipient: string;
  payload: DeliveryPayload;
  idempotency_key: string;
  attempts: number;
  inbox_id: number | null;
}

const toDelivery = (row: Row): Delivery => ({
  id: row.id,
  channel: row.channel,
  recipient: row.recipient,
  payload: row.payload,
  idempotencyKey: row.idempotency_key,
  attempts: row.attempts,
  inboxId: row.inbox_id,
});

/**
 * The deliveries: every outgoing channel message is a row before anything is sent, so a
 * crash or a channel outage loses nothing, and its idempotency key (unique) means it is queued
 * once however often the code that queues it runs.
 */
export class DeliveryStore {
  constructor(private readonly db: Queryable) {}

  /** Queues messages (in order); ones whose key is already queued are skipped. Returns the new ones. */
  async add(
    items: {
      channel: Channel;
      recipient: string;
      payload: DeliveryPayload;
      key: string;
      inboxId?: number | null;
    }[],
  ): Promise<Delivery[]> {
    const added: Delivery[] = [];
    for (const item of items) {
      const result = await this.db.query<Row>(
        `INSERT INTO deliveries (channel, recipient, payload, idempotency_key, inbox_id)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING
         RETURNING id, channel, recipient, payload, idempotency_key, attempts, inbox_id`,
        [
          item.channel,
          item.recipient,
          JSON.stringify(sanitizeDeep(item.payload)),
          item.key,
          item.inboxId ?? null,
        ],
      );
      if (result.rows[0]) added.push(toDelivery(result.rows[0]));
    }
    return added;
  }

  /**
   * Pending deliveries due now, oldest first, at most one per recipient: the oldest pending one,
   * so a message split in parts, or two messages, never arrive out of order when one waits for a
   * retry.
   */
  async due(limit = 20): Promise<Delivery[]> {
    const result = await this.db.query<Row>(
      `SELECT id, channel, recipient, payload, idempotency_key, attempts, inbox_id FROM deliveries d
       WHERE status = 'pending' AND next_attempt_at <= now()
         AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.status = 'pending' AND e.channel = d.channel
                           AND e.recipient = d.recipient AND e.id < d.id)
       ORDER BY id LIMIT $1`,
      [limit],
    );
    return result.rows.map(toDelivery);
  }

  /** When the next pending delivery is due, if any. */
  async nextDueAt(): Promise<Date | undefined> {
    const result = await this.db.query<{ at: Date | string | null }>(
      "SELECT min(next_attempt_at) AS at FROM deliveries WHERE status = 'pending'",
    );
    const at = result.rows[0]?.at;
    return at ? new Date(at) : undefined;
  }

  async sent(id: number): Promise<void> {
    await this.db.query(
      "UPDATE deliveries SET status = 'sent', sent_at = now(), attempts = attempts + 1 WHERE id = $1",
      [id],
    );
  }

  async retryLater(id: number, delayMs: number, error: string): Promise<void> {
    await this.db.query(
      `UPDATE deliveries SET attempts = attempts + 1, last_error = $3,
         next_attempt_at = now() + ($2::double precision * interval '1 millisecond') WHERE id = $1`,
      [id, delayMs, error.slice(0, 2000)],
    );
  }

  async failed(id: number, error: string): Promise<void> {
    await this.db.query(
      "UPDATE deliveries SET status = 'failed', attempts = attempts + 1, last_error = $2 WHERE id = $1",
      [id, error.slice(0, 2000)],
    );
  }

  /** Whether this turn already sent something to that person on that channel. */
  async sentDuringTurn(inboxId: number, channel: Channel, recipient: string): Promise<boolean> {
    const result = await this.db.query(
      "SELECT 1 FROM deliveries WHERE inbox_id = $1 AND channel = $2 AND recipient = $3 LIMIT 1",
      [inboxId, channel, recipient],
    );
    return result.rows.length > 0;
  }

  async get(id: number): Promise<{ status: string; lastError: string | null } | undefined> {
    const result = await this.db.query<{ status: string; last_error: string | null }>(
      "SELECT status, last_error FROM deliveries WHERE id = $1",
      [id],
    );
    const row = result.rows[0];
    return row ? { status: row.status, lastError: row.last_error } : undefined;
  }
}
