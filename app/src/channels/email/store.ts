import { createHmac, timingSafeEqual } from "node:crypto";
import type { Queryable } from "../../db/database.js";

/** Where reading a mailbox got to. */
export interface MailboxCursor {
  uidValidity: bigint;
  lastUid: number;
  updatedAt: Date;
}

export interface WaitingMail {
  id: number;
  messageId: string;
  sender: string;
  subject: string;
  reason: string;
  receivedAt: Date;
}

/** The last mail from an address: what an answer to it threads onto. */
export interface MailThread {
  messageId: string;
  references: string[];
  subject: string;
}

/** The email channel's rows: cursors, mails seen, threads, the waiting list and the signed "always" entries. */
export class EmailStore {
  private readonly key: Buffer;

  constructor(
    private readonly db: Queryable,
    secret: string,
  ) {
    this.key = createHmac("sha256", secret).update("stavrobot email unproven v1").digest();
  }

  async cursor(mailbox: string): Promise<MailboxCursor | undefined> {
    const result = await this.db.query<{ uid_validity: string; last_uid: string; updated_at: Date }>(
      "SELECT uid_validity::text, last_uid::text, updated_at FROM email_cursors WHERE mailbox = $1",
      [mailbox],
    );
    const row = result.rows[0];
    return row
      ? { uidValidity: BigInt(row.uid_validity), lastUid: Number(row.last_uid), updatedAt: row.updated_at }
      : undefined;
  }

  async saveCursor(mailbox: string, uidValidity: bigint, lastUid: number): Promise<void> {
    await this.db.query(
      `INSERT INTO email_cursors (mailbox, uid_validity, last_uid) VALUES ($1, $2, $3)
       ON CONFLICT (mailbox) DO UPDATE SET uid_validity = $2, last_uid = $3, updated_at = now()`,
      [mailbox, uidValidity.toString(), lastUid],
    );
  }

  async seen(messageId: string): Promise<boolean> {
    const result = await this.db.query("SELECT 1 FROM email_seen WHERE message_id = $1", [messageId]);
    return result.rows.length > 0;
  }

  async markSeen(messageId: string): Promise<void> {
    await this.db.query("INSERT INTO email_seen (message_id) VALUES ($1) ON CONFLICT DO NOTHING", [
      messageId,
    ]);
  }

  async rememberThread(address: string, thread: MailThread): Promise<void> {
    await this.db.query(
      `INSERT INTO email_threads (address, message_id, refs, subject) VALUES ($1, $2, $3, $4)
       ON CONFLICT (address) DO UPDATE SET message_id = $2, refs = $3, subject = $4, received_at = now()`,
      [address, thread.messageId, thread.references.join(" "), thread.subject],
    );
  }

  /** The last mail from `address` within `maxAgeDays`, which an answer threads onto. */
  async thread(address: string, maxAgeDays: number): Promise<MailThread | undefined> {
    const result = await this.db.query<{ message_id: string; refs: string; subject: string }>(
      `SELECT message_id, refs, subject FROM email_threads
       WHERE address = $1 AND received_at > now() - make_interval(days => $2)`,
      [address, maxAgeDays],
    );
    const row = result.rows[0];
    return row
      ? { messageId: row.message_id, references: row.refs.split(" ").filter(Boolean), subject: row.subject }
      : undefined;
  }

  /** Keeps a mail for the owner to decide on; false when it waits already. */
  async addWaiting(mail: {
    messageId: string;
    sender: string;
    subject: string;
    reason: string;
    raw: Buffer;
  }): Promise<boolean> {
    const result = await this.db.query(
      `INSERT INTO email_waiting (message_id, sender, subject, reason, raw) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (message_id) DO NOTHING RETURNING id`,
      [mail.messageId, mail.sender, mail.subject, mail.reason, mail.raw],
    );
    return result.rows.length > 0;
  }

  async waiting(): Promise<WaitingMail[]> {
    const result = await this.db.query<{
      id: number;
      message_id: string;
      sender: string;
      subject: string;
      reason: string;
      received_at: Date;
    }>(
      "SELECT id, message_id, sender, subject, reason, received_at FROM email_waiting WHERE status = 'waiting' ORDER BY id",
    );
    return result.rows.map((row) => ({
      id: row.id,
      messageId: row.message_id,
      sender: row.sender,
      subject: row.subject,
      reason: row.reason,
      receivedAt: row.received_at,
    }));
  }

  /** Takes a waiting mail out of the list (let through or dismissed); its raw text when it was waiting. */
  async settleWaiting(
    id: number,
    status: "let-through" | "dismissed",
  ): Promise<{ sender: string; raw: Buffer } | undefined> {
    const result = await this.db.query<{ sender: string; raw: Uint8Array }>(
      "UPDATE email_waiting SET status = $2 WHERE id = $1 AND status = 'waiting' RETURNING sender, raw",
      [id, status],
    );
    const row = result.rows[0];
    // node-postgres gives a Buffer, the embedded database a Uint8Array.
    return row && { sender: row.sender, raw: Buffer.from(row.raw) };
  }

  /** Lets mail from `address` through without proof from now on. */
  async allowUnproven(address: string): Promise<void> {
    await this.db.query(
      `INSERT INTO email_unproven_allowed (address, signature) VALUES ($1, $2)
       ON CONFLICT (address) DO UPDATE SET signature = $2`,
      [address, this.sign(address)],
    );
  }

  async disallowUnproven(address: string): Promise<void> {
    await this.db.query("DELETE FROM email_unproven_allowed WHERE address = $1", [address]);
  }

  /** Whether the owner lets `address` through without proof (a row the owner's pages did not sign does not count). */
  async unprovenAllowed(address: string): Promise<boolean> {
    const result = await this.db.query<{ signature: string }>(
      "SELECT signature FROM email_unproven_allowed WHERE address = $1",
      [address],
    );
    const given = Buffer.from(result.rows[0]?.signature ?? "", "hex");
    const expected = Buffer.from(this.sign(address), "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private sign(address: string): string {
    return createHmac("sha256", this.key).update(address).digest("hex");
  }
}
