import { errorMessage } from "@stavrobot/common";
import type { TurnStart } from "../agent/turn.js";
import { startedByNobody } from "../audience.js";
import { isDatabaseUnavailable } from "../db/database.js";
import type { InboxEntry, InboxPayload } from "../db/inbox.js";
import { RowWrite } from "../db/row-write.js";
import type { Handle, Item, QueueDeps, Submitted } from "./contracts.js";
import { aborted, failed, replied, type Answer, type Ending } from "./endings.js";
import { CurrentTurn } from "./current-turn.js";
import { HeldTurns } from "./hold.js";
import type { InboxLifecycle } from "./lifecycle.js";
import { recoverEntry } from "./recovery.js";
import { Steering } from "./steering.js";

export type { AnswerAudience, QueueDeps, Submitted, TurnEngineLike } from "./contracts.js";
import {
  DUPLICATE_REPLY,
  abortedReply,
  OUTAGE_REPLY,
  STEERING_REPLY,
  describeProviderError,
} from "./replies.js";

const never = new Promise<void>(() => {});

/**
 * One message at a time, in order. Every message is written to the inbox table before it is
 * accepted, so a crash loses nothing: `recover()` resumes whatever was unfinished.
 */
export class MessageQueue {
  private readonly items: Item[] = [];
  /** Reply promises of entries queued or running, so an entry is never queued twice. */
  private readonly waiting = new Map<number, Handle>();
  private running = false;
  /** A submit is saving an entry as started: a second one meanwhile is saved pending. */
  private reserved = false;
  private readonly steering: Steering;
  /** Turns no person started, waiting for the budget to allow them; then queued again. */
  private readonly held = new HeldTurns<Item>((items) => {
    for (const item of items) this.insertInOrder(item);
    void this.pump();
  });
  /** The entry whose turn is running (steering needs to know whose conversation it is). */
  private readonly turn: CurrentTurn;
  private idleWaiters: (() => void)[] = [];
  /** Set while the queue sleeps before retrying a turn, so /stop can cancel the retry. */
  private retryWait: AbortController | undefined;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;

  constructor(private readonly deps: QueueDeps) {
    this.steering = new Steering(deps);
    this.turn = deps.currentTurn ?? new CurrentTurn();
    this.sleep = (ms, signal) =>
      deps.sleep
        ? deps.sleep(ms)
        : new Promise((resolve) => {
            const timer = setTimeout(resolve, ms);
            signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
          });
  }

  get busy(): boolean {
    return this.running;
  }

  /** The inbox id of the message whose turn is running, if any. */
  get currentEntryId(): number | undefined {
    return this.turn.entry?.id;
  }

  /** The message whose turn is running, if any. */
  get currentEntry(): InboxEntry | undefined {
    return this.turn.entry;
  }

  /**
   * Saves the message, then either steers the running turn with it (the owner talking while the
   * assistant works) or queues it. `reply` resolves once the message is handled.
   */
  async submit(
    source: string | null,
    sender: string | null,
    payload: InboxPayload,
    idempotencyKey?: string,
  ): Promise<Submitted> {
    // Nothing runs or waits: this entry's turn starts as soon as it is saved, so it is saved started.
    const start = !this.running && this.items.length === 0 && !this.reserved && !this.deps.budgetRefusal?.();
    if (start) this.reserved = true;
    let accepted: Awaited<ReturnType<InboxLifecycle["accept"]>>;
    try {
      accepted = await this.deps.lifecycle.accept(source, sender, payload, {
        idempotencyKey,
        start,
        whileWriting: this.deps.startWhileWriting !== false,
      });
    } finally {
      if (start) this.reserved = false;
    }
    const { entry, duplicate, write } = accepted;
    if (write.pending) return this.submitWhileWriting(entry, write);
    if (duplicate) {
      return {
        id: entry.id,
        reply: Promise.resolve(DUPLICATE_REPLY),
        deferred: never,
        steered: false,
        duplicate,
        ending: () => undefined,
      };
    }
    if (await this.steering.steer(this.turn.entry, entry, payload, () => this.retryWait !== undefined)) {
      return {
        id: entry.id,
        reply: Promise.resolve(STEERING_REPLY),
        deferred: never,
        steered: true,
        duplicate,
        ending: () => undefined,
      };
    }
    return { id: entry.id, ...this.enqueue(entry, accepted.started), steered: false, duplicate };
  }

  /**
   * Starts the turn of an entry whose row is being written and returns once it is. The turn
   * writes nothing (and its reply reaches nobody) before that; if the write fails the message was
   * not accepted: its turn is abandoned and the sender gets the write's error.
   */
  private async submitWhileWriting(entry: InboxEntry, write: RowWrite): Promise<Submitted> {
    const handle = this.enqueue(entry, true, write);
    try {
      await write.done;
    } catch (error) {
      // The engine stops the turn itself (see TurnEngineLike.run); nothing of it is finished here.
      this.deps.logger.warn("a message could not be saved; its turn is abandoned", {
        id: entry.id,
        error: errorMessage(error),
      });
      throw error;
    }
    return { id: entry.id, ...handle, steered: false, duplicate: false };
  }

  /**
   * Queues an entry already saved in the inbox by someone else (a cron firing, saved in the same
   * transaction as the record of the firing). Its reply goes to the entry's audience.
   */
  accept(entry: InboxEntry): Promise<string> {
    return this.enqueue(entry).reply;
  }

  /**
   * `/stop`: aborts the running turn, or cancels a retry the queue is waiting to make. Messages
   * that steered it are stopped with it (the answer says so); those it had not taken in yet are
   * not answered later either.
   */
  stop(): string {
    if (this.deps.engine.abort()) return abortedReply(this.steering.count);
    if (this.retryWait) {
      this.retryWait.abort();
      return abortedReply(this.steering.count);
    }
    return "Nothing is running.";
  }

  /** Called once at start-up, before new messages arrive: resume or settle what was unfinished. */
  async recover(): Promise<number> {
    const unfinished = await this.deps.lifecycle.unfinished();
    // What a crashed process left behind is read from the database, not from any copy in memory.
    // After a clean stop there is nothing: the copy loaded at start (whose encoding the rehearsal
    // kept) stays.
    if (unfinished.length > 0) this.deps.reloadConversation?.();
    const ctx = {
      lifecycle: this.deps.lifecycle,
      messagesForInbox: this.deps.messagesForInbox,
      maxRetries: this.deps.maxRetries,
      conclude: async (entry: InboxEntry, ending: Ending) => {
        await this.deps.lifecycle.finish(entry.id, ending.end);
        await this.handOver(entry, ending.answer);
      },
    };
    let resumed = 0;
    for (const entry of unfinished) {
      if ((await recoverEntry(ctx, entry)) === "settled") continue;
      this.enqueue(entry);
      resumed++;
    }
    return resumed;
  }

  /** Resolves when the queue has nothing left to do (for tests and shutdown). */
  idle(): Promise<void> {
    if (!this.running && this.items.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue(entry: InboxEntry, started = false, write = RowWrite.written()): Handle {
    const existing = this.waiting.get(entry.id);
    if (existing) return existing;
    let defer = () => {};
    const deferred = new Promise<void>((resolve) => (defer = resolve));
    const item: Item = { entry, started, write, resolve: () => {}, defer };
    const reply = new Promise<string>((resolve) => {
      item.resolve = resolve;
      this.insertInOrder(item);
    });
    const handle = { reply, deferred, ending: () => item.ending };
    this.waiting.set(entry.id, handle);
    void this.pump();
    return handle;
  }

  /**
   * Runs a database write, and while the database is away waits for it and tries again, so that
   * nothing accepted is dropped because PostgreSQL restarted. The waiting sender is told at once.
   */
  private async durably<T>(item: Item, write: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await write();
      } catch (error) {
        if (!isDatabaseUnavailable(error)) throw error;
        await this.outage(item, error);
      }
    }
  }

  /**
   * Waits for the database to come back. Whoever waits for this entry's reply, or for one queued
   * behind it, is told now that their message is saved and will run then.
   */
  private async outage(item: Item, error: unknown): Promise<void> {
    this.deps.logger.warn("the database is unavailable; waiting for it", {
      id: item.entry.id,
      error: errorMessage(error),
    });
    item.defer();
    for (const queued of this.items) queued.defer();
    await this.deps.waitForDatabase();
    this.deps.logger.info("the database is back", { id: item.entry.id });
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (let item = this.items.shift(); item; item = this.items.shift()) {
        const { entry } = item;
        const current = item;
        // Should this fail, the model call itself is refused by the same budget.
        if (await this.refusedByBudget(item).catch(() => false)) continue;
        this.turn.set(entry);
        const reply = await this.processDurably(item).catch(async (error: unknown) => {
          if (await current.write.lost()) return ABANDONED;
          this.deps.logger.error("processing a message failed", { id: entry.id, error });
          const ending = failed(`Something went wrong: ${errorMessage(error)}`, errorMessage(error));
          return this.conclude(current, ending).catch(() => ending.reply);
        });
        this.turn.set(undefined);
        this.waiting.delete(entry.id);
        item.resolve(reply);
        // Nothing here may throw out of pump(): the next message must still run.
        await this.steering
          .settle(
            (id) => this.waiting.has(id),
            (entry) => this.enqueue(entry),
            current.ending === "aborted",
          )
          .catch((error: unknown) => this.deps.logger.error("settling steered messages failed", { error }));
        await this.deps
          .afterTurn()
          .catch((error: unknown) => this.deps.logger.error("after-turn work failed", { error }));
      }
    } finally {
      this.running = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }

  /**
   * Over budget, a person's message is answered at once with the reason, and a turn no person
   * started waits (status pending, so a restart keeps it) until the budget allows it.
   */
  private async refusedByBudget(item: Item): Promise<boolean> {
    const refusal = this.deps.budgetRefusal?.();
    if (!refusal) return false;
    const { entry } = item;
    if (startedByNobody(entry.source)) {
      this.deps.logger.info("turn held until the budget allows it", {
        id: entry.id,
        until: refusal.resetsAt,
      });
      this.held.hold(item, refusal.resetsAt);
      return true;
    }
    await this.conclude(item, failed(refusal.message, "over budget"));
    this.waiting.delete(entry.id);
    item.resolve(refusal.message);
    return true;
  }

  /** Into the queue in acceptance order (inbox id order), even when saves finish out of order. */
  private insertInOrder(item: Item): void {
    const at = this.items.findIndex((queued) => queued.entry.id > item.entry.id);
    this.items.splice(at === -1 ? this.items.length : at, 0, item);
  }

  /**
   * Processes the entry; if the database goes away before its turn starts (its message is being
   * built), waits for it and starts again. The turn itself reports an outage as its outcome.
   */
  private async processDurably(item: Item): Promise<string> {
    for (;;) {
      try {
        return await this.process(item);
      } catch (error) {
        if (!isDatabaseUnavailable(error) || (await item.write.lost())) throw error;
        await this.outage(item, error);
      }
    }
  }

  private async process(item: Item): Promise<string> {
    const { entry } = item;
    // Whose conversation it joins was decided when it was accepted; building the message (fetching
    // a channel's files) rewrites the payload, and must not change that.
    const agentId = entry.payload.agentId;
    const message = await this.deps.buildUserMessage(entry);
    let resumed = false;
    for (let attempt = 0; ; attempt++) {
      const start: TurnStart = resumed
        ? "resume"
        : item.started === true && attempt === 0
          ? "started"
          : "count";
      // What steered the turn while the queue waited to retry it is taken in first.
      const steers = this.steering.takeHeld();
      const outcome = await this.deps.engine.run(entry.id, message, start, item.write, agentId, steers);
      // Never saved: never accepted (the sender was told so); nothing of it may be written.
      if (await item.write.lost()) return ABANDONED;
      resumed = false;
      if (outcome.kind === "reply") return this.conclude(item, replied(outcome.text));
      if (outcome.kind === "aborted") return this.conclude(item, aborted());
      if (outcome.databaseDown) {
        await this.outage(item, outcome.message);
        if (!outcome.progressSaved) {
          // Nothing of the turn reached the database: run it again, as if for the first time.
          resumed = true;
          attempt--;
          continue;
        }
        return this.conclude(item, failed(OUTAGE_REPLY, outcome.message));
      }
      if (outcome.retryable && attempt < this.deps.maxRetries) {
        const retry = { attempt: attempt + 1, of: this.deps.maxRetries, reason: outcome.message };
        this.deps.logger.warn("turn failed, retrying", { id: entry.id, ...retry });
        const inSeconds = this.deps.retryDelayMs / 1000;
        this.deps.progress?.(entry.id, {
          type: "retry",
          ...retry,
          reason: describeProviderError(retry.reason),
          inSeconds,
        });
        // Until the next attempt, the owner's messages steer it: they are held for it, with those
        // this attempt had not taken in.
        const wait = new AbortController();
        this.retryWait = wait;
        try {
          await this.steering.holdUntaken().catch((error: unknown) =>
            // Not held: queued as turns of their own after this one (Steering.settle).
            this.deps.logger.warn("could not hold steering messages for the retry", {
              id: entry.id,
              error: errorMessage(error),
            }),
          );
          await this.sleep(this.deps.retryDelayMs, wait.signal);
        } finally {
          this.retryWait = undefined;
        }
        if (wait.signal.aborted) return this.conclude(item, aborted());
        continue;
      }
      return this.conclude(
        item,
        failed(`Something went wrong: ${describeProviderError(outcome.message)}`, outcome.message),
      );
    }
  }

  /**
   * Finishes the item's entry as `ending` says and hands its answer to its audience, waiting out
   * a database outage like every other write of a turn. Returns the reply for whoever waits.
   */
  private async conclude(item: Item, ending: Ending): Promise<string> {
    await this.durably(item, () => this.deps.lifecycle.finish(item.entry.id, ending.end));
    item.ending = ending.answer.kind;
    await this.handOver(item.entry, ending.answer, item);
    return ending.reply;
  }

  /**
   * Hands an answer to its audience (`answers.deliver`). It waits out a database outage like every
   * other write of a turn (with `item`); a failure is logged, never thrown: the answer is in the
   * inbox and is handed over again at the next start.
   */
  private async handOver(entry: InboxEntry, answer: Answer, item?: Item): Promise<void> {
    const deliver = () => this.deps.answers.deliver(entry, answer);
    try {
      await (item ? this.durably(item, deliver) : deliver());
    } catch (error) {
      this.deps.logger.error("could not hand over an answer", { id: entry.id, error: errorMessage(error) });
    }
  }
}

/** What a turn whose message was never saved resolves to (nobody waits for it: the sender got the error). */
const ABANDONED = "This message could not be saved.";
