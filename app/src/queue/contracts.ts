import type { UserMessage } from "@mariozechner/pi-ai";
import type { Logger } from "@stavrobot/common";
import type { TurnOutcome, TurnStart } from "../agent/turn.js";
import type { InboxEntry } from "../db/inbox.js";
import type { StoredMessage } from "../db/messages.js";
import type { RowWrite } from "../db/row-write.js";
import type { Answer } from "./endings.js";
import type { CurrentTurn } from "./current-turn.js";
import type { InboxLifecycle } from "./lifecycle.js";
import type { TurnProgressEvent } from "../live/progress.js";

/* What the queue needs from the rest of the app, and what it gives a sender. */

/** An owner's message steering a turn, held for the turn's next attempt. */
export interface HeldSteer {
  inboxId: number;
  message: UserMessage;
}

/** The part of TurnEngine the queue drives (an interface so tests can script outcomes). */
export interface TurnEngineLike {
  readonly busy: boolean;
  /**
   * Runs the entry's turn, marking the entry `processing` as `start` says (default "count"). While
   * `write` is pending (the entry's row still being written) the turn writes nothing, and it
   * stops (taking no steering) if the write fails.
   */
  run(
    inboxId: number,
    message: UserMessage,
    start?: TurnStart,
    write?: RowWrite,
    /** Whose conversation the turn is part of (default the main agent's). */
    agentId?: number,
    /**
     * Steering messages the turn takes in first, before the model's first call (they came while
     * the queue waited to retry it). Taken in, they are written with the turn's next write, so
     * an attempt that fails and is tried again has not kept them.
     */
    steers?: HeldSteer[],
  ): Promise<TurnOutcome>;
  steer(inboxId: number, message: UserMessage): boolean;
  abort(): boolean;
}

/** Who hears of a finished turn's answer: a channel's deliveries, or the owner's console. */
export interface AnswerAudience {
  /** Takes the answer (or error) to the entry's audience. Idempotent: after a crash it may run again. */
  deliver(entry: InboxEntry, answer: Answer): Promise<void>;
}

export interface QueueDeps {
  /** The inbox row's state machine: accepting, starting, steering, finishing. */
  lifecycle: InboxLifecycle;
  engine: TurnEngineLike;
  /** Where each finished turn's answer goes. */
  answers: AnswerAudience;
  buildUserMessage: (entry: InboxEntry) => Promise<UserMessage>;
  messagesForInbox: (inboxId: number) => Promise<StoredMessage[]>;
  /** Forgets any in-memory copy of the conversation (recovery reads the database). */
  reloadConversation?: () => void;
  /** Runs after each finished turn, before the next message (compaction). */
  afterTurn: () => Promise<void>;
  /** Told whose turn runs (read by what the turn calls); default one of the queue's own. */
  currentTurn?: CurrentTurn;
  /** Whether a new message from `incoming` may steer the turn running for `running`. */
  maySteer: (running: InboxEntry, incoming: { source: string | null; sender: string | null }) => boolean;
  /**
   * Whether the idle queue starts a message's turn while its row is still written (a third of a
   * millisecond to a millisecond sooner; see DECISIONLOG.md). Default true.
   */
  startWhileWriting?: boolean;
  /** Told of each retry before the queue waits for it (the sender may be following). */
  progress?: (inboxId: number, event: TurnProgressEvent) => void;
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
  /** How its turn ended, once `reply` has resolved (undefined for a steer or a repeat). */
  ending: () => Answer["kind"] | undefined;
}

/** What whoever waits for a queued entry holds. */
export type Handle = Pick<Submitted, "reply" | "deferred" | "ending">;

export interface Item {
  entry: InboxEntry;
  /** Saved already `processing` with its first attempt counted (the queue was idle). */
  started: boolean;
  /** Whether its row is written (still under way when the idle queue started its turn). */
  write: RowWrite;
  resolve: (reply: string) => void;
  defer: () => void;
  /** How its turn ended, set when it is concluded. */
  ending?: Answer["kind"];
}
