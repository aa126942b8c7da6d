import { sanitizeDeep } from "@stavrobot/common";
import type { Channel } from "../audience.js";
import type { Queryable } from "../db/database.js";
import type { InboxPayload } from "../db/inbox.js";

export type { Channel } from "../audience.js";

/** What one delivery sends: text (already in the channel's format) and/or one file. */
export interface DeliveryPayload {
  text?: string;
  /** The deliveries' own copy of the file (taken when the message was queued; removed once settled). */
  attachmentPath?: string;
  /** The file name the recipient sees. */
  attachmentName?: string;
  /** A mail's subject (email only; without one, an answer goes into its recipient's last thread). */
  subject?: string;
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
  /** Kept for the owner's consoles as this notice (its channel could not deliver it), if it was. */
  keptInboxId: number | null;
  /** Why its last attempt failed, if one did. */
  lastError: string | null;
}

interface Row {
  id: number;
  channel: Channel;
  recipient: string;
  payload: DeliveryPayload;
  idempotency_key: string;
  attempts: number;
  inbox_id: number | null;
  kept_inbox_id: number | null;
  last_error: string | null;
}

const COLUMNS =
  "id, channel, recipient, payload, idempotency_key, attempts, inbox_id, kept_inbox_id, last_error";
/** The same, of the table named `d`. */
const D_COLUMNS = COLUMNS.split(", ")
  .map((column) => `d.${column}`)
  .join(", ");

const toDelivery = (row: Row): Delivery => ({
  id: row.id,
  channel: row.channel,
  recipient: row.recipient,
  payload: row.payload,
  idempotencyKey: row.idempotency_key,
  attempts: row.attempts,
  inboxId: row.inbox_id,
  keptInboxId: row.kept_inbox_id,
  lastError: row.last_error,
});

/** A person on a channel (the owner, on each channel they are reached on). */
export interface Contact {
  channel: Channel;
  recipient: string;
}

/** A delivery that waits on a failure, with the failure and the turn it came from (if any). */
export interface StrandedDelivery extends Delivery {
  /** Why the first of its recipient's pending deliveries could not be sent. */
  reason: string;
  /** The inbox entry of the turn that queued it (its title names the notice), if any. */
  turn: { source: string | null; payload: InboxPayload } | null;
}

/** What waits to be sent, for the home page. */
export interface DeliveryBacklog {
  /** Pending, not yet sent (nor withdrawn). */
  waiting: number;
  /** Given up in the last 7 days. */
  givenUp: number;
  /** The oldest failure among those waiting: the channel, and what it said. */
  failing?: { channel: Channel; error: string };
}

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
         RETURNING ${COLUMNS}`,
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
      `SELECT ${COLUMNS} FROM deliveries d
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

  /** `channelDown`: the channel itself cannot send now (its service or program is not running). */
  async retryLater(id: number, delayMs: number, error: string, channelDown = false): Promise<void> {
    await this.db.query(
      `UPDATE deliveries SET attempts = attempts + 1, last_error = $3, channel_down = $4,
         failing_since = coalesce(failing_since, now()),
         next_attempt_at = now() + ($2::double precision * interval '1 millisecond') WHERE id = $1`,
      [id, delayMs, error.slice(0, 2000), channelDown],
    );
  }

  /**
   * Pending deliveries to these contacts that are not kept for the owner yet and wait on a
   * failure: the first pending one of their recipient has failed, and either its channel is down
   * or it has been failing for `graceMs` (a blip or a short rate limit is left to the retries).
   * Those queued behind it count too: they are not even tried while it waits. Oldest first.
   */
  async stranded(contacts: readonly Contact[], graceMs: number): Promise<StrandedDelivery[]> {
    if (contacts.length === 0) return [];
    const result = await this.db.query<
      Row & { reason: string; turn_source: string | null; turn_payload: InboxPayload | null }
    >(
      `SELECT ${D_COLUMNS}, h.last_error AS reason, i.source AS turn_source, i.payload AS turn_payload
       FROM deliveries d
       JOIN LATERAL (
         SELECT last_error, channel_down, failing_since FROM deliveries h
         WHERE h.status = 'pending' AND h.channel = d.channel AND h.recipient = d.recipient
         ORDER BY h.id LIMIT 1
       ) h ON true
       LEFT JOIN inbox i ON i.id = d.inbox_id
       WHERE d.status = 'pending' AND d.kept_inbox_id IS NULL
         AND (d.channel, d.recipient) IN (SELECT * FROM unnest($1::text[], $2::text[]))
         AND h.last_error IS NOT NULL
         AND (h.channel_down OR h.failing_since <= now() - ($3::double precision * interval '1 millisecond'))
       ORDER BY d.id`,
      [contacts.map((contact) => contact.channel), contacts.map((contact) => contact.recipient), graceMs],
    );
    return result.rows.map((row) => ({
      ...toDelivery(row),
      reason: row.reason,
      turn: row.turn_payload ? { source: row.turn_source, payload: row.turn_payload } : null,
    }));
  }

  /** These deliveries are kept for the owner's consoles as the notice `inboxId`. */
  async keptAs(ids: number[], inboxId: number): Promise<void> {
    await this.db.query("UPDATE deliveries SET kept_inbox_id = $2 WHERE id = ANY($1::int[])", [ids, inboxId]);
  }

  /**
   * Withdraws the pending deliveries whose kept notice a console has shown the owner (or the owner
   * dismissed): they reached the owner there, and are not sent on the channel as well. Returns them.
   */
  async withdrawShown(): Promise<Delivery[]> {
    const result = await this.db.query<Row>(
      `UPDATE deliveries d SET status = 'withdrawn',
         last_error = coalesce(d.last_error || '; ', '') || 'shown to the owner on their console instead'
       FROM inbox i
       WHERE d.status = 'pending' AND i.id = d.kept_inbox_id AND i.seen
       RETURNING ${D_COLUMNS}`,
    );
    return result.rows.map(toDelivery);
  }

  /** Whether a delivery kept as this notice still waits to be sent. */
  async keptPending(keptInboxId: number): Promise<boolean> {
    const result = await this.db.query(
      "SELECT 1 FROM deliveries WHERE kept_inbox_id = $1 AND status = 'pending' LIMIT 1",
      [keptInboxId],
    );
    return result.rows.length > 0;
  }

  /** What waits to be sent and what was given up lately (the home page's queue card). */
  async backlog(): Promise<DeliveryBacklog> {
    // A pending one whose kept notice a console has shown is as good as withdrawn (the worker's
    // next round does it): not counted.
    const waiting = `d.status = 'pending' AND NOT coalesce(i.seen, false)`;
    const counts = await this.db.query<{ waiting: number | string; given_up: number | string }>(
      `SELECT count(*) FILTER (WHERE ${waiting}) AS waiting,
         count(*) FILTER (WHERE d.status = 'failed' AND d.created_at > now() - interval '7 days') AS given_up
       FROM deliveries d LEFT JOIN inbox i ON i.id = d.kept_inbox_id
       WHERE d.status IN ('pending', 'failed')`,
    );
    const failing = await this.db.query<{ channel: Channel; last_error: string }>(
      `SELECT d.channel, d.last_error FROM deliveries d LEFT JOIN inbox i ON i.id = d.kept_inbox_id
       WHERE ${waiting} AND d.last_error IS NOT NULL ORDER BY d.id LIMIT 1`,
    );
    const row = failing.rows[0];
    return {
      waiting: Number(counts.rows[0]?.waiting ?? 0),
      givenUp: Number(counts.rows[0]?.given_up ?? 0),
      ...(row ? { failing: { channel: row.channel, error: row.last_error } } : {}),
    };
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
