import type { UserMessage } from "@mariozechner/pi-ai";
import { errorMessage, type Logger } from "@stavrobot/common";
import type { InboxEntry, InboxPayload, InboxStore } from "./db/inbox.js";
import type { StoredMessage } from "./db/messages.js";
import type { TurnOutcome } from "./agent/turn.js";

/** The part of TurnRunner the queue drives (an interface so tests can script outcomes). */
export interface Runner {
  readonly busy: boolean;
  run(inboxId: number, message: UserMessage): Promise<TurnOutcome>;
  steer(inboxId: number, message: UserMessage): boolean;
  abort(): boolean;
}

export interface QueueDeps {
  inbox: InboxStore;
  runner: Runner;
  buildUserMessage: (entry: InboxEntry) => Promise<UserMessage>;
  messagesForInbox: (inboxId: number) => Promise<StoredMessage[]>;
  /** Runs after each finished turn, before the next message (compaction). */
  afterTurn: () => Promise<void>;
  /** Pushes a text to a sender on channels that can receive one (Signal, Telegram...). */
  notify: (entry: InboxEntry, text: string) => Promise<void>;
  maxRetries: number;
  retryDelayMs: number;
  sleep?: (ms: number) => Promise<void>;
  logger: Logger;
}

export const STEERING_REPLY = "Message received, steering the current request.";
export const ABORTED_REPLY = "Aborted.";
export const DUPLICATE_REPLY = "This message was already received.";
export const INTERRUPTED_REPLY =
  "Your message was interrupted (the assistant restarted) after some of its actions had already run. " +
  "It was not retried, to avoid repeating them; please check what was done and ask again if needed.";
export const CRASHED_REPLY =
  "The assistant stopped unexpectedly every time it worked on your message, so it gave up on it. " +
  "Please try again, perhaps worded differently.";

export interface Submitted {
  id: number;
  reply: Promise<string>;
  /** The reply only acknowledges steering; the message's real outcome comes with the turn. */
  steered: boolean;
  /** The idempotency key was seen before: nothing new was saved. */
  duplicate: boolean;
}

interface Item {
  entry: InboxEntry;
  resolve: (reply: string) => void;
}

/**
 * One message at a time, in order. Every message is written to the inbox table before it is
 * accepted, so a crash loses nothing: `recover()` resumes whatever was unfinished.
 */
export class MessageQueue {
  private readonly items: Item[] = [];
  /** Reply promises of entries queued or running, so an entry is never queued twice. */
  private readonly waiting = new Map<number, Promise<string>>();
  private running = false;
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
    const { entry, duplicate } = await this.deps.inbox.add(source, sender, payload, idempotencyKey);
    if (duplicate)
      return { id: entry.id, reply: Promise.resolve(DUPLICATE_REPLY), steered: false, duplicate };
    if (this.deps.runner.busy && isOwner(source) && payload.message?.trim()) {
      try {
        const message = await this.deps.buildUserMessage(entry);
        await this.deps.inbox.markSteered(entry.id);
        // Settled after the turn: done if the turn took it in, queued otherwise (settleSteered).
        if (this.deps.runner.steer(entry.id, message)) {
          return { id: entry.id, reply: Promise.resolve(STEERING_REPLY), steered: true, duplicate };
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
    return { id: entry.id, reply: this.enqueue(entry), steered: false, duplicate };
  }

  /** `/stop`: aborts the running turn, or cancels a retry the queue is waiting to make. */
  stop(): string {
    if (this.deps.runner.abort()) return ABORTED_REPLY;
    if (this.retryWait) {
      this.retryWait.abort();
      return ABORTED_REPLY;
    }
    return "Nothing is running.";
  }

  /** Called once at start-up, before new messages arrive: resume or settle what was unfinished. */
  async recover(): Promise<number> {
    let resumed = 0;
    for (const entry of await this.deps.inbox.unfinished()) {
      const saved = await this.deps.messagesForInbox(entry.id);
      if (entry.status === "steered") {
        if (await this.settleSteer(entry)) continue;
        await this.deps.inbox.markPending(entry.id);
      } else if (saved.some((row) => row.message.role !== "user")) {
        await this.settleInterrupted(entry, saved);
        continue;
      } else if (entry.attempts > this.deps.maxRetries) {
        // Each start that picked it up counted an attempt: it keeps taking the process down.
        await this.deps.inbox.finish(
          entry.id,
          "failed",
          CRASHED_REPLY,
          `gave up after ${entry.attempts} attempts`,
        );
        await this.deps.notify(entry, CRASHED_REPLY);
        continue;
      }
      void this.enqueue(entry);
      resumed++;
    }
    return resumed;
  }

  /** Resolves when the queue has nothing left to do (for tests and shutdown). */
  idle(): Promise<void> {
    if (!this.running && this.items.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue(entry: InboxEntry): Promise<string> {
    const existing = this.waiting.get(entry.id);
    if (existing) return existing;
    const reply = new Promise<string>((resolve) => {
      // Acceptance order is inbox id order, even when two saves finish out of order.
      const at = this.items.findIndex((item) => item.entry.id > entry.id);
      this.items.splice(at === -1 ? this.items.length : at, 0, { entry, resolve });
    });
    this.waiting.set(entry.id, reply);
    void this.pump();
    return reply;
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (let item = this.items.shift(); item; item = this.items.shift()) {
        const { entry } = item;
        const reply = await this.process(entry).catch(async (error: unknown) => {
          this.deps.logger.error("processing a message failed", { id: entry.id, error });
          const text = `Something went wrong: ${errorMessage(error)}`;
          await this.deps.inbox.finish(entry.id, "failed", text, errorMessage(error)).catch(() => {});
          return text;
        });
        this.waiting.delete(entry.id);
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

  private async process(entry: InboxEntry): Promise<string> {
    const message = await this.deps.buildUserMessage(entry);
    for (let attempt = 0; ; attempt++) {
      await this.deps.inbox.markProcessing(entry.id);
      const outcome = await this.deps.runner.run(entry.id, message);
      if (outcome.kind === "reply") {
        const text = outcome.text || "(The assistant finished without a text reply.)";
        await this.deps.inbox.finish(entry.id, "done", text);
        return text;
      }
      if (outcome.kind === "aborted") {
        await this.deps.inbox.finish(entry.id, "done", ABORTED_REPLY);
        return ABORTED_REPLY;
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
          await this.deps.inbox.finish(entry.id, "done", ABORTED_REPLY);
          return ABORTED_REPLY;
        }
        continue;
      }
      const text = `Something went wrong: ${describeProviderError(outcome.message)}`;
      await this.deps.inbox.finish(entry.id, "failed", text, outcome.message);
      await this.deps.notify(entry, text);
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
      await this.deps.inbox.finish(entry.id, "done", text);
      return;
    }
    await this.deps.inbox.finish(
      entry.id,
      "failed",
      INTERRUPTED_REPLY,
      "interrupted after tool results were saved",
    );
    await this.deps.notify(entry, INTERRUPTED_REPLY);
  }

  /**
   * After a turn: steering messages it took in are done (their acknowledgement was the reply);
   * any that came too late become turns of their own, whose reply the owner sees later.
   */
  private async settleSteered(): Promise<void> {
    for (const entry of await this.deps.inbox.unfinished()) {
      if (entry.status !== "steered" || this.waiting.has(entry.id)) continue;
      if (await this.settleSteer(entry)) continue;
      await this.deps.inbox.markPending(entry.id);
      void this.enqueue(entry);
    }
  }

  private async settleSteer(entry: InboxEntry): Promise<boolean> {
    const saved = await this.deps.messagesForInbox(entry.id);
    if (!saved.some((row) => row.message.role === "user")) return false;
    await this.deps.inbox.finish(entry.id, "done", STEERING_REPLY, undefined, true);
    return true;
  }
}

/** The owner talks through the CLI or the web (no source); channels come with allowlists later. */
function isOwner(source: string | null): boolean {
  return source === null || source === "cli" || source === "web";
}

/** "400 {"type":"error","error":{"message":"x"}}" → "x (HTTP 400)". */
export function describeProviderError(message: string): string {
  const match = /^(\d{3})\s+(\{.*\})\s*$/s.exec(message.trim());
  if (match) {
    try {
      const body = JSON.parse(match[2] as string) as { error?: { message?: string }; message?: string };
      const inner = body.error?.message ?? body.message;
      if (inner) return `${inner} (HTTP ${match[1]})`;
    } catch {
      // Fall through to the raw text.
    }
  }
  return message;
}
