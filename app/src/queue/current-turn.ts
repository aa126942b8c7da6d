import type { InboxEntry } from "../db/inbox.js";

/**
 * Whose turn is running: the queue says so as each turn starts and ends, and what a turn calls
 * (the send tools, the usage records of a tool's own model calls) reads it. Made before either,
 * so neither needs the other.
 */
export class CurrentTurn {
  private running: InboxEntry | undefined;

  /** The entry whose turn is running, if any. */
  get entry(): InboxEntry | undefined {
    return this.running;
  }

  /** Set by the queue. */
  set(entry: InboxEntry | undefined): void {
    this.running = entry;
  }
}
