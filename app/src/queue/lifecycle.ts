import type { StatementPart } from "../db/database.js";
import type { InboxEntry, InboxPayload, InboxStore } from "../db/inbox.js";
import { finishChange, processingChange, type EntryEnd } from "../db/inbox-changes.js";
import { RowWrite } from "../db/row-write.js";

export { RowWrite };

/** The message was taken in: its entry, whether its row is written, whether it repeats an earlier one. */
export interface Acceptance {
  entry: InboxEntry;
  write: RowWrite;
  /** Saved already `processing`, its first attempt counted (the queue was idle). */
  started: boolean;
  /** The idempotency key was seen before: nothing new was saved; `entry` is the earlier one. */
  duplicate: boolean;
}

export interface LifecycleDeps {
  inbox: InboxStore;
  /**
   * The conversation's writes still held in memory (a turn's tool results and final answer):
   * they are written with the entry's end. Absent, the end is written alone.
   */
  conversation?: { flush(companions: StatementPart[]): Promise<void> };
  /** The turn's usage rows, written with the entry's end. */
  meter?: {
    writeWith<T>(write: (usage: StatementPart[]) => Promise<T>): Promise<T>;
    /** An entry that was never written: what was recorded about it must not point at it. */
    unlink(inboxId: number): void;
  };
}

/**
 * The inbox row's state machine, owned here: a message is inserted (or reserved, when the idle
 * queue starts its turn while the row is written), becomes `processing` with its user message,
 * may be `steered` into a running turn or sent back to `pending`, and is finished with the
 * turn's last messages and usage rows in one statement, with its outcome. Whether its answer was
 * seen is the inbox store's (`noteSeen`, `markSeen`).
 */
export class InboxLifecycle {
  constructor(private readonly deps: LifecycleDeps) {}

  get inbox(): InboxStore {
    return this.deps.inbox;
  }

  /**
   * Takes a message in. `start`: the queue runs it at once, so it is saved `processing` with its
   * first attempt counted. `whileWriting`: its turn may start before the row is written (see
   * `RowWrite`); only without an idempotency key, which must be checked against earlier rows first.
   */
  async accept(
    source: string | null,
    sender: string | null,
    payload: InboxPayload,
    options: { idempotencyKey?: string | undefined; start: boolean; whileWriting: boolean },
  ): Promise<Acceptance> {
    const { inbox } = this.deps;
    if (options.start && options.whileWriting && options.idempotencyKey === undefined) {
      const reserved = inbox.reserve(source, sender, payload);
      if (reserved) {
        const write = RowWrite.writing(reserved.saved);
        // The turn's model calls were recorded under an id that will never exist.
        write.onFailure(() => this.deps.meter?.unlink(reserved.entry.id));
        return { entry: reserved.entry, write, started: true, duplicate: false };
      }
    }
    const { entry, duplicate } = await inbox.add(source, sender, payload, options.idempotencyKey, {
      start: options.start,
    });
    return { entry, write: RowWrite.written(), started: options.start && !duplicate, duplicate };
  }

  /** The change that starts an entry's turn, written in the same statement as its user message. */
  processing(inboxId: number, countAttempt: boolean): StatementPart {
    return processingChange(inboxId, countAttempt);
  }

  /** A steering message the running turn took (settled after the turn). */
  steered(inboxId: number): Promise<void> {
    return this.deps.inbox.markSteered(inboxId);
  }

  /** Back to waiting for a turn of its own. */
  pending(inboxId: number): Promise<void> {
    return this.deps.inbox.markPending(inboxId);
  }

  /** Entries accepted and not finished, oldest first. */
  unfinished(): Promise<InboxEntry[]> {
    return this.deps.inbox.unfinished();
  }

  /**
   * Finishes an entry: its status, reply and outcome, with the turn's messages still held in
   * memory and its usage rows, in one statement (one commit).
   */
  finish(inboxId: number, end: EntryEnd): Promise<void> {
    const { conversation, meter, inbox } = this.deps;
    if (!conversation) return inbox.finish(inboxId, end);
    const change = finishChange(inboxId, end);
    if (!meter) return conversation.flush([change]);
    return meter.writeWith((usage) => conversation.flush([change, ...usage]));
  }
}
