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
export const INTERRUPTED_REPLY =
  "Your message was interrupted (the assistant restarted) after some of its actions had already run. " +
  "It was not retried, to avoid repeating them; please check what was done and ask again if needed.";

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
  private running = false;
  private idleWaiters: (() => void)[] = [];
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly deps: QueueDeps) {
    this.sleep = deps.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  get busy(): boolean {
    return this.running;
  }

  /**
   * Saves the message, then either steers the running turn with it (the owner talking while the
   * assistant works) or queues it. Resolves with the reply once the message is handled.
   */
  async submit(
    source: string | null,
    sender: string | null,
    payload: InboxPayload,
  ): Promise<{ id: number; reply: Promise<string> }> {
    const entry = await this.deps.inbox.add(source, sender, payload);
    if (this.deps.runner.busy && isOwner(source) && payload.message?.trim()) {
      const message = await this.deps.buildUserMessage(entry);
      await this.deps.inbox.markSteered(entry.id);
      // Settled after the turn: done if the turn took it in, queued otherwise (see settleSteered).
      if (this.deps.runner.steer(entry.id, message))
        return { id: entry.id, reply: Promise.resolve(STEERING_REPLY) };
    }
    return { id: entry.id, reply: this.enqueue(entry) };
  }

  /** `/stop`: aborts the running turn. */
  stop(): string {
    return this.deps.runner.abort() ? ABORTED_REPLY : "Nothing is running.";
  }

  /** Called once at start-up: resume or settle every message that was not finished. */
  async recover(): Promise<number> {
    let resumed = 0;
    for (const entry of await this.deps.inbox.unfinished()) {
      const saved = await this.deps.messagesForInbox(entry.id);
      if (entry.status === "steered") {
        if (await this.settleSteer(entry)) continue;
      } else if (saved.some((row) => row.message.role !== "user")) {
        await this.settleInterrupted(entry, saved);
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
    return new Promise((resolve) => {
      // Acceptance order is inbox id order, even when two saves finish out of order.
      const at = this.items.findIndex((item) => item.entry.id > entry.id);
      this.items.splice(at === -1 ? this.items.length : at, 0, { entry, resolve });
      void this.pump();
    });
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (let item = this.items.shift(); item; item = this.items.shift()) {
        const reply = await this.process(item.entry).catch(async (error: unknown) => {
          this.deps.logger.error("processing a message failed", { id: item?.entry.id, error });
          const text = `Something went wrong: ${errorMessage(error)}`;
          await this.deps.inbox.finish(item!.entry.id, "failed", text, errorMessage(error)).catch(() => {});
          return text;
        });
        item.resolve(reply);
        await this.settleSteered();
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
        await this.sleep(this.deps.retryDelayMs);
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

  /** Steering messages the finished turn took in are done; any that came too late run next. */
  private async settleSteered(): Promise<void> {
    for (const entry of await this.deps.inbox.unfinished()) {
      if (entry.status === "steered" && !(await this.settleSteer(entry))) {
        await this.deps.inbox.markProcessing(entry.id);
        void this.enqueue(entry);
      }
    }
  }

  private async settleSteer(entry: InboxEntry): Promise<boolean> {
    const saved = await this.deps.messagesForInbox(entry.id);
    if (!saved.some((row) => row.message.role === "user")) return false;
    await this.deps.inbox.finish(entry.id, "done", STEERING_REPLY);
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
