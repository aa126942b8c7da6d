import { randomBytes } from "node:crypto";

/**
 * Something the owner's open consoles (the REPL, the web page) should hear of at once. `type` is
 * the Server-Sent Events name (`answer` today); `data` is sent as JSON. Clients ignore types they
 * do not know, so a new kind needs no new endpoint and breaks no client.
 */
export interface LiveEvent {
  type: string;
  data: object;
}

/**
 * The kind published today: an answer kept for the owner's console from a turn no person started
 * (a reminder, a plugin's result, a notice). Its data is an entry of `GET /api/answers/pending`.
 */
export const ANSWER_EVENT = "answer";

/** Notifications the owner dismissed (`{ids}`), so every open page stops listing them. */
export const DISMISSED_EVENT = "dismissed";

/** An event with its place in this process's sequence. */
export interface Published {
  seq: number;
  event: LiveEvent;
  /** A stream was open when it was published (it reached a console, or is on its way). */
  heard: boolean;
}

/** How many published events are kept for clients that reconnect. */
const JOURNAL_SIZE = 1_000;

/**
 * The owner's live events: published in one order, each with a sequence number, and the latest
 * ones kept so a client that reconnects can be given exactly what it missed. Its place is a
 * cursor (`<start id>.<seq>`, the SSE event id): a cursor from another start of the app, or older
 * than what is kept, is unknown, and such a client is given the durable state instead (for
 * answers: every one still unseen). Nothing here touches the database or HTTP.
 */
export class LiveEvents {
  /** Tells this start's cursors from an earlier start's. */
  private readonly start = randomBytes(6).toString("base64url");
  private seq = 0;
  private readonly journal: Published[] = [];
  private readonly listeners = new Set<(published: Published) => void>();
  private readonly closers = new Set<() => void>();
  private closedFlag = false;

  publish(type: string, data: object): void {
    if (this.closedFlag) return;
    const published = { seq: ++this.seq, event: { type, data }, heard: this.listeners.size > 0 };
    this.journal.push(published);
    if (this.journal.length > JOURNAL_SIZE) this.journal.shift();
    for (const listener of this.listeners) listener(published);
  }

  /** The sequence number of the latest event (0 before any). */
  get latest(): number {
    return this.seq;
  }

  cursor(seq: number): string {
    return `${this.start}.${seq}`;
  }

  /**
   * The sequence number a cursor names, when every event after it is still kept; undefined for a
   * cursor of another start, a malformed one, or one older than the journal.
   */
  position(cursor: string | undefined): number | undefined {
    if (!cursor) return undefined;
    const dot = cursor.lastIndexOf(".");
    if (dot === -1 || cursor.slice(0, dot) !== this.start) return undefined;
    const text = cursor.slice(dot + 1);
    if (!/^\d{1,15}$/.test(text)) return undefined;
    const seq = Number(text);
    const oldest = this.journal[0]?.seq ?? this.seq + 1;
    if (seq > this.seq || seq < oldest - 1) return undefined;
    return seq;
  }

  /** Kept events after `after`, up to and including `until`, in order. */
  between(after: number, until: number): Published[] {
    return this.journal.filter((published) => published.seq > after && published.seq <= until);
  }

  /** Calls `listener` with every event published from now on; returns the unsubscribe. */
  subscribe(listener: (published: Published) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Registers what ends one open stream when the app stops; returns its removal. Closed already:
   * `close` runs at once and false is returned.
   */
  onClose(close: () => void): (() => void) | false {
    if (this.closedFlag) {
      close();
      return false;
    }
    this.closers.add(close);
    return () => this.closers.delete(close);
  }

  /** Listeners and open streams (nothing is left behind by a stream that ended). */
  get size(): { listeners: number; streams: number } {
    return { listeners: this.listeners.size, streams: this.closers.size };
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Ends every open stream (the app is stopping); later streams end as soon as they open. */
  close(): void {
    this.closedFlag = true;
    for (const close of [...this.closers]) close();
    this.closers.clear();
  }
}
