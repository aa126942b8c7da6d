import type { InboxEntry } from "../db/inbox.js";

/**
 * Whose turn is running: the queue says so as each turn starts and ends, and what a turn calls
 * (the send tools, the usage records of a tool's own model calls) reads it. Made before either,
 * so neither needs the other.
 *
 * It also knows whether SQL the model ran wrote anything, from the transaction ids of the turn's
 * own writes (each conversation save returns its rows' `xmin`). The tool calls are saved just
 * before they run; if the turn's next write has the very next id, no transaction that wrote
 * anything (any table, DDL, a function a SELECT called, a write rolled back) took one in between,
 * so the SQL wrote nothing and the copies of the conversation and the knowledge hold. Anything
 * else, another database of the same server included, asks for them to be checked: too cautious
 * at worst, never wrong.
 */
export class CurrentTurn {
  private running: InboxEntry | undefined;
  /**
   * Where the running turn's outside text came from ("web_fetch, Bob (telegram 2002)"), when it
   * holds some: set by the trust gate (trust/gate.ts); what the turn writes to notes keeps it.
   */
  outside: string | undefined;
  private lastWrite: number | undefined;
  /** SQL ran since the write `since`; `recheck` unless the next write proves it wrote nothing. */
  private sql: { since: number; recheck: () => void } | undefined;

  /** The entry whose turn is running, if any. */
  get entry(): InboxEntry | undefined {
    return this.running;
  }

  /** Set by the queue. A turn's start or end also settles SQL no write came after. */
  set(entry: InboxEntry | undefined): void {
    this.running = entry;
    this.outside = undefined;
    this.settle(undefined);
  }

  /** Told by the conversations as they write: the transaction id of the write. */
  wrote(xid: number): void {
    this.settle(xid);
    this.lastWrite = xid;
  }

  /** SQL the model ran may have written: `recheck` is called unless the next write shows it did not. */
  sqlRan(recheck: () => void): void {
    // SQL already waiting for its answer covers this one too (nothing was written in between).
    if (this.sql) return;
    if (this.lastWrite === undefined) recheck();
    else this.sql = { since: this.lastWrite, recheck };
  }

  private settle(next: number | undefined): void {
    const sql = this.sql;
    this.sql = undefined;
    if (sql && next !== (sql.since + 1) % 2 ** 32) sql.recheck();
  }
}
