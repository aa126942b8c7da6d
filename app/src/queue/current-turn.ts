import type { InboxEntry } from "../db/inbox.js";

/**
 * Whose turn is running: the queue says so as each turn starts and ends, and what a turn calls
 * (the send tools, the usage records of a tool's own model calls) reads it. Made before either,
 * so neither needs the other.
 */
export class CurrentTurn {
  private running: InboxEntry | undefined;
  private written: number | undefined;

  /** The entry whose turn is running, if any. */
  get entry(): InboxEntry | undefined {
    return this.running;
  }

  /**
   * The transaction id of the running turn's latest write of its conversation: the save of the
   * tool calls that run next. `execute_sql` compares the database's next transaction id with it
   * to know whether the model's SQL wrote anything at all (`db/transactions.ts`).
   */
  get lastWrite(): number | undefined {
    return this.written;
  }

  /** Set by the queue. */
  set(entry: InboxEntry | undefined): void {
    this.running = entry;
    this.written = undefined;
  }

  /** Told by the conversations as they write. */
  wrote(xid: number): void {
    if (this.running) this.written = xid;
  }
}
