import type { UserMessage } from "@mariozechner/pi-ai";
import { errorMessage, type Logger } from "@stavrobot/common";
import { isDatabaseUnavailable } from "./db/database.js";
import type { InboxEntry, InboxPayload, InboxStore } from "./db/inbox.js";
import type { StoredMessage } from "./db/messages.js";
import type { TurnOutcome, TurnStart } from "./agent/turn.js";
import type { Answer } from "./delivery/answers.js";
import { startedByNobody } from "./audience.js";
import { HeldTurns } from "./queue-hold.js";
import {
  STEERING_REPLY,
  ABORTED_REPLY,
  DUPLICATE_REPLY,
  EMPTY_REPLY,
  INTERRUPTED_REPLY,
  OUTAGE_REPLY,
  CRASHED_REPLY,
  describeProviderError,
} from "./queue-replies.js";

/** The part of TurnEngine the queue drives (an interface so tests can script outcomes). */
export interface TurnEngineLike {
  readonly busy: boolean;
  /**
   * Runs the entry's turn, marking the entry `processing` as `start` says (default "count"). With
   * `saved`, the entry's insert is still under way: the turn writes nothing before it resolves,
   * and stops (taking no steering) if it fails.
   */
  run(inboxId: number, message: UserMessage, start?: TurnStart, saved?: Promise<void>): Promise<TurnOutcome>;
  steer(inboxId: number, message: UserMessage): boolean;
  abort(): boolean;
}

export interface QueueDeps {
  inbox: InboxStore;
  engine: TurnEngineLike;
  buildUserMessage: (entry: InboxEntry) => Promise<UserMessage>;
  messagesForInbox: (inboxId: number) => Promise<StoredMessage[]>;
  /**
   * Finishes an entry (the inbox update), writing with it any messages of its turn still waiting
   * to be written. Default: the inbox update alone.
   */
  finish?: (
    id: number,
    status: "done" | "failed",
    response: string,
    error?: string,
    delivered?: boolean,
  ) => Promise<void>;
  /** Forgets any in-memory copy of the conversation (recovery reads the database). */
  reloadConversation?: () => void;
  /** Runs after each finished turn, before the next message (compaction). */
  afterTurn: () => Promise<void>;
  /**
   * Takes a finished turn's answer (or error) to its audience: a channel's outbox, or the owner's
   * console. Must be idempotent: after a crash it may run again for the same entry.
   */
  deliver: (entry: InboxEntry, answer: Answer) => Promise<void>;
  /** Whether a new message from `incoming` may steer the turn running for `running`. */
  maySteer: (running: InboxEntry, incoming: { source: string | null; sender: string | null }) => boolean;
  /**
   * An entry whose insert failed after its turn had started (`InboxStore.reserve`): what the turn
   * recorded about it (its model calls' cost) must not point at a row that does not exist.
   */
  unsaved?: (inboxId: number) => void;
  /** Resolves once the database answers again after an outage. */
  waitForDatabase: () => Promise<void>;
  /**
   * A used-up budget: no turn starts. A person's message is answered with the message; a turn no
   * person started (cron, a plugin's result) is held until `resetsAt` and then runs.
   */
  budgetRefusal?: () => { message: string; resetsAt: Date } | undefined;
  maxRetries: number;
  retryDelayMs: number;
  sleep?: (ms: number) => Promise<void>;
  logger: Logger;
}

export interface Submitted {
  id: number;
  reply: Promise<string>;
  /**
   * Resolves if the database goes away while the message waits or runs: it is saved and will run
   * when the database is back, but whoever waits for `reply` may want to answer now.
   */
  deferred: Promise<void>;
  /** The reply only acknowledges steering; the message's real outcome comes with the turn. */
  steered: boolean;
  /** The idempotency key was seen before: nothing new was saved. */
  duplicate: boolean;
}

interface Item {
  entry: InboxEntry;
  /** Saved already `processing` with its first attempt counted (the queue was idle). */
  started?: boolean;
  /** Its insert, still under way when the turn started (`InboxStore.reserve`). */
  saved?: Promise<void>;
  resolve: (reply: string) => void;
  defer: () => void;
}

const never = new Promise<void>(() => {});

/**
 * One message at a time, in order. Every message is written to the inbox table before it is
 * accepted, so a crash loses nothing: `recover()` resumes whatever was unfinished.
 */
export class MessageQueue {
  private readonly items: Item[] = [];
  /** Reply promises of entries queued or running, so an entry is never queued twice. */
  private readonly waiting = new Map<number, { reply: Promise<string>; deferred: Promise<void> }>();
  private running = false;
  /** A submit is saving an entry as started: a second one meanwhile is saved pending. */
  private reserved = false;
  /** Whether a message steered a turn since steering was last settled. */
  private steeredSinceSettled = false;
  /** Turns no person started, waiting for the budget to allow them; then queued again. */
  private readonly held = new HeldTurns<Item>((items) => {
    for (const item of items) this.insertInOrder(item);
    void this.pump();
  });
  /** The entry whose turn is running (steering needs to know whose conversation it is). */
  private current: InboxEntry | undefined;
  private idleWaiters: (() => void)[] = [];
  /** Set while the queue sleeps before retrying a turn, so /stop can cancel the retry. */
  private retryWait: AbortController | undefined;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;

  constructor(private readonly deps: QueueDeps) {
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
    return this.current?.id;
  }

  /** The message whose turn is running, if any. */
  get currentEntry(): InboxEntry | undefined {
    return this.current;
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
    // Without an idempotency key it cannot be a repeat: its turn starts while it is being saved.
    const saving =
      start && idempotencyKey === undefined ? this.deps.inbox.reserve(source, sender, payload) : undefined;
    if (saving) return this.submitWhileSaving(saving.entry, saving.saved);
    if (start) this.reserved = true;
    let added: Awaited<ReturnType<InboxStore["add"]>>;
    try {
      added = await this.deps.inbox.add(source, sender, payload, idempotencyKey, { start });
    } finally {
      if (start) this.reserved = false;
    }
    const { entry, duplicate } = added;
    if (duplicate) {
      return {
        id: entry.id,
        reply: Promise.resolve(DUPLICATE_REPLY),
        deferred: never,
        steered: false,
        duplicate,
      };
    }
    const running = this.current;
    if (
      running &&
      this.deps.engine.busy &&
      payload.message?.trim() &&
      // Files still to fetch would hold up the sender's answer: such a message waits its turn.
      !payload.media?.length &&
      this.deps.maySteer(running, { source, sender })
    ) {
      try {
        const message = await this.deps.buildUserMessage(entry);
        await this.deps.inbox.markSteered(entry.id);
        this.steeredSinceSettled = true;
        // Settled after the turn: done if the turn took it in, queued otherwise (settleSteered).
        if (this.deps.engine.steer(entry.id, message)) {
          return {
            id: entry.id,
            reply: Promise.resolve(STEERING_REPLY),
            deferred: never,
            steered: true,
            duplicate,
          };
        }
        await this.deps.inbox.markPending(entry.id);
      } catch (error) {
        this.deps.logger.warn("could not steer; queueing instead", {
          id: entry.id,
          error: errorMessage(error),
        });
        await this.deps.inbox.markPending(entry.id).catch(() => {});
      }
    }
    return { id: entry.id, ...this.enqueue(entry, start), steered: false, duplicate };
  }

  /**
   * Starts the turn of an entry whose insert is under way and returns once it is saved. The turn
   * writes nothing (and its reply reaches nobody) before that; if the insert fails the message was
   * not accepted: its turn is abandoned and the sender gets the insert's error.
   */
  private async submitWhileSaving(entry: InboxEntry, saved: Promise<void>): Promise<Submitted> {
    const handle = this.enqueue(entry, true, saved);
    try {
      await saved;
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

  /** `/stop`: aborts the running turn, or cancels a retry the queue is waiting to make. */
  stop(): string {
    if (this.deps.engine.abort()) return ABORTED_REPLY;
    if (this.retryWait) {
      this.retryWait.abort();
      return ABORTED_REPLY;
    }
    return "Nothing is running.";
  }

  private finish(
    id: number,
    status: "done" | "failed",
    response: string,
    error?: string,
    delivered?: boolean,
  ): Promise<void> {
    return (this.deps.finish ?? this.deps.inbox.finish.bind(this.deps.inbox))(
      id,
      status,
      response,
      error,
      delivered,
    );
  }

  /** Called once at start-up, before new messages arrive: resume or settle what was unfinished. */
  async recover(): Promise<number> {
    const unfinished = await this.deps.inbox.unfinished();
    // What a crashed process left behind is read from the database, not from any copy in memory.
    // After a clean stop there is nothing: the copy loaded at start (whose encoding the rehearsal
    // kept) stays.
    if (unfinished.length > 0) this.deps.reloadConversation?.();
    let resumed = 0;
    for (const entry of unfinished) {
      const saved = await this.deps.messagesForInbox(entry.id);
      if (entry.status === "steered") {
        if (await this.settleSteer(entry)) continue;
        await this.deps.inbox.markPending(entry.id);
      } else if (saved.some((row) => row.message.role !== "user")) {
        await this.settleInterrupted(entry, saved);
        continue;
      } else if (entry.attempts > this.deps.maxRetries) {
        // Each start that picked it up counted an attempt: it keeps taking the process down.
        await this.finish(entry.id, "failed", CRASHED_REPLY, `gave up after ${entry.attempts} attempts`);
        await this.tell(entry, { kind: "error", text: CRASHED_REPLY });
        continue;
      }
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

  private enqueue(
    entry: InboxEntry,
    started = false,
    saved?: Promise<void>,
  ): { reply: Promise<string>; deferred: Promise<void> } {
    const existing = this.waiting.get(entry.id);
    if (existing) return existing;
    let defer = () => {};
    const deferred = new Promise<void>((resolve) => (defer = resolve));
    const reply = new Promise<string>((resolve) =>
      this.insertInOrder({ entry, started, saved, resolve, defer }),
    );
    const handle = { reply, deferred };
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
        this.current = entry;
        const reply = await this.processDurably(item).catch(async (error: unknown) => {
          if (await unsaved(current)) return ABANDONED;
          this.deps.logger.error("processing a message failed", { id: entry.id, error });
          const text = `Something went wrong: ${errorMessage(error)}`;
          await this.durably(current, () => this.finish(entry.id, "failed", text, errorMessage(error))).catch(
            () => {},
          );
          await this.tell(entry, { kind: "error", text }, current);
          return text;
        });
        this.current = undefined;
        this.waiting.delete(entry.id);
        if (await unsaved(item)) this.deps.unsaved?.(entry.id);
        item.resolve(reply);
        // Nothing here may throw out of pump(): the next message must still run.
        await this.settleSteered().catch((error: unknown) =>
          this.deps.logger.error("settling steered messages failed", { error }),
        );
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
    await this.durably(item, () => this.finish(entry.id, "failed", refusal.message, "over budget"));
    await this.tell(entry, { kind: "error", text: refusal.message }, item);
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
        if (!isDatabaseUnavailable(error) || (await unsaved(item))) throw error;
        await this.outage(item, error);
      }
    }
  }

  private async process(item: Item): Promise<string> {
    const { entry } = item;
    const message = await this.deps.buildUserMessage(entry);
    let resumed = false;
    for (let attempt = 0; ; attempt++) {
      const start: TurnStart = resumed
        ? "resume"
        : item.started === true && attempt === 0
          ? "started"
          : "count";
      const outcome = await this.deps.engine.run(entry.id, message, start, item.saved);
      // Never saved: never accepted (the sender was told so); nothing of it may be written.
      if (await unsaved(item)) return ABANDONED;
      resumed = false;
      if (outcome.kind === "reply") {
        const text = outcome.text || EMPTY_REPLY;
        await this.durably(item, () => this.finish(entry.id, "done", text));
        await this.tell(entry, { kind: "reply", text: outcome.text }, item);
        return text;
      }
      if (outcome.kind === "aborted") {
        await this.durably(item, () => this.finish(entry.id, "done", ABORTED_REPLY));
        await this.tell(entry, { kind: "aborted", text: ABORTED_REPLY }, item);
        return ABORTED_REPLY;
      }
      if (outcome.databaseDown) {
        await this.outage(item, outcome.message);
        if (!outcome.progressSaved) {
          // Nothing of the turn reached the database: run it again, as if for the first time.
          resumed = true;
          attempt--;
          continue;
        }
        await this.durably(item, () => this.finish(entry.id, "failed", OUTAGE_REPLY, outcome.message));
        await this.tell(entry, { kind: "error", text: OUTAGE_REPLY }, item);
        return OUTAGE_REPLY;
      }
      if (outcome.retryable && attempt < this.deps.maxRetries) {
        this.deps.logger.warn("turn failed, retrying", {
          id: entry.id,
          attempt: attempt + 1,
          error: outcome.message,
        });
        const wait = new AbortController();
        this.retryWait = wait;
        await this.sleep(this.deps.retryDelayMs, wait.signal);
        this.retryWait = undefined;
        if (wait.signal.aborted) {
          await this.durably(item, () => this.finish(entry.id, "done", ABORTED_REPLY));
          await this.tell(entry, { kind: "aborted", text: ABORTED_REPLY }, item);
          return ABORTED_REPLY;
        }
        continue;
      }
      const text = `Something went wrong: ${describeProviderError(outcome.message)}`;
      await this.durably(item, () => this.finish(entry.id, "failed", text, outcome.message));
      await this.tell(entry, { kind: "error", text }, item);
      return text;
    }
  }

  private async settleInterrupted(entry: InboxEntry, saved: StoredMessage[]): Promise<void> {
    const last = saved[saved.length - 1]?.message;
    if (last?.role === "assistant" && !last.content.some((block) => block.type === "toolCall")) {
      const text = last.content
        .filter((block) => block.type === "text")
        .map((block) => block.text)
        .join("\n");
      await this.finish(entry.id, "done", text);
      await this.tell(entry, { kind: "reply", text });
      return;
    }
    await this.finish(entry.id, "failed", INTERRUPTED_REPLY, "interrupted after tool results were saved");
    await this.tell(entry, { kind: "error", text: INTERRUPTED_REPLY });
  }

  /**
   * Hands an answer to its audience. It waits out a database outage like every other write of a
   * turn (with `item`); a failure is logged, never thrown: the answer is in the inbox and is
   * handed over again at the next start.
   */
  private async tell(entry: InboxEntry, answer: Answer, item?: Item): Promise<void> {
    const deliver = () => this.deps.deliver(entry, answer);
    try {
      await (item ? this.durably(item, deliver) : deliver());
    } catch (error) {
      this.deps.logger.error("could not hand over an answer", { id: entry.id, error: errorMessage(error) });
    }
  }

  /**
   * After a turn: steering messages it took in are done (their acknowledgement was the reply);
   * any that came too late become turns of their own, whose reply the owner sees later.
   */
  private async settleSteered(): Promise<void> {
    // Nothing was steered since the last settling: no row can be waiting (recover() handles a start).
    if (!this.steeredSinceSettled) return;
    this.steeredSinceSettled = false;
    try {
      for (const entry of await this.deps.inbox.unfinished()) {
        if (entry.status !== "steered" || this.waiting.has(entry.id)) continue;
        if (await this.settleSteer(entry)) continue;
        await this.deps.inbox.markPending(entry.id);
        this.enqueue(entry);
      }
    } catch (error) {
      this.steeredSinceSettled = true;
      throw error;
    }
  }

  private async settleSteer(entry: InboxEntry): Promise<boolean> {
    const saved = await this.deps.messagesForInbox(entry.id);
    if (!saved.some((row) => row.message.role === "user")) return false;
    await this.finish(entry.id, "done", STEERING_REPLY, undefined, true);
    return true;
  }
}

/** What a turn whose message was never saved resolves to (nobody waits for it: the sender got the error). */
const ABANDONED = "This message could not be saved.";

/** Whether the item's insert, still under way when its turn started, failed. */
function unsaved(item: Item): Promise<boolean> {
  if (!item.saved) return Promise.resolve(false);
  return item.saved.then(
    () => false,
    () => true,
  );
}
