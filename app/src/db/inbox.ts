import type { Queryable } from "./database.js";
import { sanitizeDeep, sanitizeText, type Attachment } from "@stavrobot/common";
import { SeenFlags, seenChange } from "./inbox-seen.js";
import { NextInboxId } from "./inbox-next-id.js";
import { finishChange, processingChange, type EntryEnd, type InboxOutcome } from "./inbox-changes.js";

export {
  finishChange,
  processingChange,
  type EntryEnd,
  type InboxChange,
  type InboxOutcome,
} from "./inbox-changes.js";

/** What is kept of an accepted message: files are already on disk, referenced as attachments. */
export interface InboxPayload {
  message?: string | undefined;
  attachments: Attachment[];
  /**
   * Files still on a channel's servers (Telegram's), fetched when the turn runs (then moved to
   * `attachments`); `ref` is what the channel needs to fetch one.
   */
  media?: DeferredMedia[] | undefined;
  /** The agent whose conversation the message joins (absent: the main agent, the owner's). */
  agentId?: number | undefined;
  /** How that agent sees the sender (the interlocutor's display name, or "name (ID: n)" of an agent). */
  from?: string | undefined;
  /**
   * The person a turn no person started answers, when it is not the owner: a plugin's result for a
   * run a subagent started in its conversation with them (`channel` is where they wrote from).
   */
  replyTo?: { channel: string; recipient: string } | undefined;
  /**
   * What the owner calls it, for a message no person wrote (a reminder's note, a plugin's tool):
   * its notification and the web chat's history show this instead of the model's instructions.
   */
  title?: string | undefined;
  /** A call the owner approved (trust/approvals.ts): its agent's turn runs it before the model is asked. */
  approval?: number | undefined;
  /**
   * Where the message's words came from when not from whoever sent it (trust/gate.ts): a reminder
   * set in a turn that held outside text, an MCP server's prompt the owner asked for.
   */
  outside?: string | undefined;
}

/** A file a channel's message named, to fetch when its turn runs. */
export interface DeferredMedia {
  channel: string;
  ref: unknown;
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
  /** Set once the entry is finished. */
  outcome?: InboxOutcome | undefined;
}

interface InboxRow {
  id: number;
  received_at: Date;
  source: string | null;
  sender: string | null;
  payload: InboxPayload;
  status: InboxStatus;
  attempts: number;
  outcome: InboxOutcome | null;
}

const columns = "id, received_at, source, sender, payload, status, attempts, outcome";

/**
 * Where an entry came from and which agent's conversation it joined (absent: none such), read
 * whatever its state: a plugin's run started in that turn reports back there.
 */
export async function entryOrigin(
  db: Queryable,
  id: number,
): Promise<Pick<InboxEntry, "source" | "sender" | "payload"> | undefined> {
  const result = await db.query<Pick<InboxRow, "source" | "sender" | "payload">>(
    "SELECT source, sender, payload FROM inbox WHERE id = $1",
    [id],
  );
  return result.rows[0];
}

function toEntry(row: InboxRow): InboxEntry {
  return {
    id: row.id,
    receivedAt: new Date(row.received_at),
    source: row.source,
    sender: row.sender,
    payload: row.payload,
    status: row.status,
    attempts: row.attempts,
    ...(row.outcome ? { outcome: row.outcome } : {}),
  };
}

/** The next inbox id, drawn ahead of need (see `InboxStore.reserve`). */
const NEXT_ID = "nextval('inbox_id_seq')::int";

/** A finished reply nobody has seen yet, with the message it answers. */
export interface UnseenAnswer {
  id: number;
  source: string | null;
  message: string;
  response: string;
  /** Its notification's title, in the owner's words (set when it is first kept). */
  title?: string | undefined;
}

/** Durable record of accepted messages: written before a message is acknowledged. */
export class InboxStore {
  /** Answers for the owner's console finished since start and not yet marked seen. */
  private readonly unseen = new Set<number>();
  /** Whether the database was asked (since start) for unseen answers and had none left. */
  private backlogChecked = false;
  /** Answers received (`noteSeen`) whose flag is not written yet. */
  private readonly seenFlags = new SeenFlags((ids) => this.markSeen(ids));

  constructor(
    private readonly db: Queryable,
    /** For "seen" flags: losing one on a server crash only shows a reply again. */
    private readonly relaxed: Queryable = db,
    /**
     * The id `reserve` gives the next message: drawn from the sequence by every insert of every
     * store of the app (`within`), and kept only while it is newer than any entry already saved.
     */
    private readonly ahead = new NextInboxId(),
  ) {}

  /** This store on `tx` (a transaction), drawing the id ahead for the same app. */
  within(tx: Queryable): InboxStore {
    return new InboxStore(tx, tx, this.ahead);
  }

  /**
   * Saves a new message. With an idempotency key already seen, nothing is saved and the earlier
   * entry is returned with `duplicate: true`.
   */
  async add(
    source: string | null,
    sender: string | null,
    payload: InboxPayload,
    idempotencyKey?: string,
    options: { start?: boolean } = {},
  ): Promise<{ entry: InboxEntry; duplicate: boolean }> {
    // `start`: the queue is idle and runs the entry at once, so it is saved already `processing`
    // with its first attempt counted, sparing the turn a commit of its own to say so. The
    // "received" flags of earlier answers ride along.
    const result = await this.seenFlags.ride(7, (parts) =>
      this.db.query<InboxRow & { spare: number }>(
        `${parts.sql}INSERT INTO inbox (source, sender, payload, idempotency_key, status, attempts)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING ${columns}, ${NEXT_ID} AS spare`,
        [
          source === null ? null : sanitizeText(source),
          sender === null ? null : sanitizeText(sender),
          JSON.stringify(sanitizeDeep(payload)),
          idempotencyKey ?? null,
          options.start ? "processing" : "pending",
          options.start ? 1 : 0,
          ...parts.params,
        ],
        { prepare: true },
      ),
    );
    const row = result.rows[0];
    if (row) {
      this.ahead.offer(row.spare);
      return { entry: toEntry(row), duplicate: false };
    }
    const existing = await this.db.query<InboxRow>(
      `SELECT ${columns} FROM inbox WHERE idempotency_key = $1`,
      [idempotencyKey],
    );
    return { entry: toEntry(existing.rows[0] as InboxRow), duplicate: true };
  }

  /**
   * Saves a message the idle queue runs at once without waiting for the insert: the entry takes an
   * id drawn from the sequence ahead of need, so its turn can build its request and ask the model
   * while the row is written. `saved` settles with the insert; the caller lets the turn write
   * nothing, and nobody hear of it, before `saved` resolved (the model call is no effect anyone
   * sees). Undefined when no id is at hand (`drawAhead` not run, or the last insert failed):
   * then the message is `add`ed.
   */
  reserve(
    source: string | null,
    sender: string | null,
    payload: InboxPayload,
  ): { entry: InboxEntry; saved: Promise<void> } | undefined {
    const id = this.ahead.take();
    if (id === undefined) return undefined;
    const entry: InboxEntry = {
      id,
      receivedAt: new Date(),
      source: source === null ? null : sanitizeText(source),
      sender: sender === null ? null : sanitizeText(sender),
      payload: sanitizeDeep(payload),
      status: "processing",
      attempts: 1,
    };
    // Sent from the next turn of the event loop, once the turn has sent its model request: the
    // embedded database runs the insert on this thread, which would otherwise hold the request back.
    const saved = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() =>
        this.seenFlags.ride(6, (parts) =>
          this.db.query<{ spare: number }>(
            `${parts.sql}INSERT INTO inbox (id, received_at, source, sender, payload, status, attempts)
             VALUES ($1, $2, $3, $4, $5, 'processing', 1)
             RETURNING ${NEXT_ID} AS spare`,
            [
              id,
              entry.receivedAt,
              entry.source,
              entry.sender,
              JSON.stringify(entry.payload),
              ...parts.params,
            ],
            { prepare: true },
          ),
        ),
      )
      .then((result) => this.ahead.offer(result.rows[0]?.spare));
    return { entry, saved };
  }

  /** Draws the id the next `reserve` uses (at start-up; every insert draws the next one). */
  async drawAhead(): Promise<void> {
    const result = await this.db.query<{ spare: number }>(`SELECT ${NEXT_ID} AS spare`, [], {
      prepare: true,
    });
    this.ahead.offer(result.rows[0]?.spare);
  }

  /** Forgets the drawn id (SQL may have reset the sequence): the next message is `add`ed. */
  forgetAhead(): void {
    this.ahead.forget();
  }

  /**
   * A note for the owner that is not the answer to a message (a delivery given up): saved as a
   * finished entry nobody has seen, so the next console reply or the CLI shows it.
   */
  async addNotice(source: string, about: string, text: string): Promise<UnseenAnswer> {
    const message = sanitizeText(about);
    const response = sanitizeText(text);
    // Its title is kept with it, so a console that lists it later names it as the first one did.
    const title = message.replace(/^\((.*)\)$/s, "$1");
    const result = await this.db.query<{ id: number; spare: number }>(
      `INSERT INTO inbox (source, payload, status, response, outcome, finished_at)
       VALUES ($1, $2, 'done', $3, 'notice', now())
       RETURNING id, ${NEXT_ID} AS spare`,
      [source, JSON.stringify({ message, attachments: [], title }), response],
    );
    const id = result.rows[0]?.id ?? 0;
    this.ahead.offer(result.rows[0]?.spare);
    this.noteUnseen(id);
    return { id, source, message, response, title };
  }

  /**
   * A finished answer for the owner's console that nobody has seen yet (tracked in memory, so a
   * console reply does not ask the database for missed answers when there cannot be any).
   */
  noteUnseen(id: number): void {
    this.unseen.add(id);
  }

  /** Back to waiting for its own turn, and its reply not yet seen by anyone. */
  async markPending(id: number): Promise<void> {
    await this.db.query("UPDATE inbox SET status = 'pending', seen = false WHERE id = $1", [id]);
  }

  /** A turn starts; `countAttempt` is false when it only resumes after a database outage. */
  async markProcessing(id: number, countAttempt = true): Promise<void> {
    const change = processingChange(id, countAttempt);
    await this.db.query(change.sql(1), change.params);
  }

  async markSteered(id: number): Promise<void> {
    await this.db.query("UPDATE inbox SET status = 'steered' WHERE id = $1", [id]);
  }

  /** Finishes the entry in a statement of its own (the queue's lifecycle rides it with the turn's writes). */
  async finish(id: number, end: EntryEnd): Promise<void> {
    const change = finishChange(id, end);
    await this.db.query(change.sql(1), change.params);
  }

  async updatePayload(id: number, payload: InboxPayload): Promise<void> {
    await this.db.query("UPDATE inbox SET payload = $2 WHERE id = $1", [
      id,
      JSON.stringify(sanitizeDeep(payload)),
    ]);
  }

  /** Flags answers as received, now. */
  async markSeen(ids: number[]): Promise<void> {
    if (ids.length === 0) return;
    for (const id of ids) this.unseen.delete(id);
    const change = seenChange(ids);
    try {
      await this.relaxed.query(change.sql(1), change.params, { prepare: true });
      this.seenFlags.written(ids);
    } catch (error) {
      // Not marked after all: the next console reply asks the database again.
      this.backlogChecked = false;
      throw error;
    }
  }

  /**
   * Flags answers as received, soon: with the next message's insert (the next message usually
   * follows), or alone a second later, or when the app closes (`SeenFlags`); one statement
   * less per turn. Meanwhile this store leaves them out of `unseenAnswers` itself. A crash before the
   * write shows them once more at the next start, as losing a relaxed commit could.
   */
  noteSeen(ids: number[]): void {
    if (ids.length === 0) return;
    for (const id of ids) this.unseen.delete(id);
    this.seenFlags.note(ids);
  }

  /** Writes the flags `noteSeen` still holds (before the app closes); kept if it fails. */
  flushSeen(): Promise<void> {
    return this.seenFlags.flush();
  }

  /** Messages accepted but not finished, oldest first (to resume after a restart). */
  async unfinished(): Promise<InboxEntry[]> {
    const result = await this.db.query<InboxRow>(
      `SELECT ${columns} FROM inbox WHERE status IN ('pending', 'processing', 'steered') ORDER BY id`,
    );
    return result.rows.map(toEntry);
  }

  /** The latest finished entries whose answer nobody has received yet, newest first. */
  async recentUnseen(limit: number): Promise<(InboxEntry & { response: string })[]> {
    const result = await this.db.query<InboxRow & { response: string }>(
      `SELECT ${columns}, response FROM inbox
       WHERE NOT seen AND status IN ('done', 'failed') AND response IS NOT NULL
       ORDER BY id DESC LIMIT $1`,
      [limit],
    );
    return result.rows
      .filter((row) => !this.seenFlags.has(row.id))
      .map((row) => ({ ...toEntry(row), response: row.response }));
  }

  /**
   * Finished replies that no waiting client received (the app restarted mid-turn, or nobody waited:
   * a plugin's result, a cron entry). For the owner's console that is every reply meant for the
   * owner (every source but the channels, which deliver their own); for a channel, its own source.
   */
  async unseenAnswers(
    audience: { owner: true } | { source: string },
    beforeId: number,
    channels: readonly string[] = [],
    limit = 20,
  ): Promise<UnseenAnswer[]> {
    const owner = "owner" in audience;
    // Nothing older was left unseen at start, and nothing since: no need to ask.
    if (owner && this.backlogChecked && ![...this.unseen].some((id) => id < beforeId)) return [];
    const condition =
      "owner" in audience ? "(source IS NULL OR NOT (source = ANY($2::text[])))" : "source = $2";
    const result = await this.db.query<{
      id: number;
      source: string | null;
      payload: InboxPayload;
      response: string;
    }>(
      `SELECT id, source, payload, response FROM inbox
       WHERE status IN ('done', 'failed') AND NOT seen AND id < $1 AND response IS NOT NULL
         AND ${condition}
       ORDER BY id LIMIT $3`,
      [beforeId, "owner" in audience ? channels : audience.source, limit],
    );
    const rows = result.rows.filter((row) => !this.seenFlags.has(row.id));
    if (owner && rows.length === 0) this.backlogChecked = true;
    return rows.map((row) => ({
      id: row.id,
      source: row.source,
      message: row.payload.message ?? "",
      response: row.response,
      ...(row.payload.title ? { title: row.payload.title } : {}),
    }));
  }

  /** Which of these answers nobody has marked seen yet. */
  async stillUnseen(ids: number[]): Promise<Set<number>> {
    if (ids.length === 0) return new Set();
    const result = await this.db.query<{ id: number }>(
      "SELECT id FROM inbox WHERE id = ANY($1::int[]) AND NOT seen",
      [ids],
    );
    return new Set(result.rows.map((row) => row.id).filter((id) => !this.seenFlags.has(id)));
  }
}
