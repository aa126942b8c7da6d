import type { UserMessage } from "@mariozechner/pi-ai";
import { errorMessage } from "@stavrobot/common";
import type { InboxEntry, InboxPayload } from "../db/inbox.js";
import type { HeldSteer, QueueDeps } from "./contracts.js";
import { STOPPED_STEER_END } from "./endings.js";
import { settleSteer } from "./recovery.js";

/**
 * The owner talking while the assistant works: a new message of theirs joins the running turn
 * (`engine.steer`) instead of waiting, when that turn is theirs and answered where they write
 * (`maySteer`). While the queue waits to retry the turn, it is held for the next attempt, which
 * takes it in first (as it does one an attempt that failed had not taken in). Whether the turn
 * took it in is settled after the turn: done if it did; if it came too late, queued as a turn of
 * its own, unless the turn was stopped (`/stop`): then it is stopped with it, as the owner
 * stopped what it was steering.
 */
export class Steering {
  /** Messages that steered the turn since steering was last settled, by inbox id. */
  private readonly steered = new Map<number, UserMessage>();
  /** Messages the turn's next attempt takes in first. */
  private held: HeldSteer[] = [];

  constructor(
    private readonly deps: Pick<
      QueueDeps,
      "engine" | "lifecycle" | "buildUserMessage" | "maySteer" | "messagesForInbox" | "logger"
    >,
  ) {}

  /** How many messages steered the turn since steering was last settled. */
  get count(): number {
    return this.steered.size;
  }

  /**
   * Steers the turn running for `running` with the saved `entry`; false when it cannot (it waits
   * its turn). `waitingToRetry`: whether the queue waits to retry that turn (asked again once the
   * message is built, as the wait may have ended meanwhile).
   */
  async steer(
    running: InboxEntry | undefined,
    entry: InboxEntry,
    payload: InboxPayload,
    waitingToRetry: () => boolean = () => false,
  ): Promise<boolean> {
    const { deps } = this;
    if (
      !running ||
      !(deps.engine.busy || waitingToRetry()) ||
      !payload.message?.trim() ||
      // Files still to fetch would hold up the sender's answer: such a message waits its turn.
      payload.media?.length ||
      !deps.maySteer(running, { source: entry.source, sender: entry.sender })
    ) {
      return false;
    }
    try {
      const message = await deps.buildUserMessage(entry);
      await deps.lifecycle.steered(entry.id);
      const held = !deps.engine.busy && waitingToRetry();
      if (held || deps.engine.steer(entry.id, message)) {
        this.steered.set(entry.id, message);
        if (held) this.held.push({ inboxId: entry.id, message });
        return true;
      }
      await deps.lifecycle.pending(entry.id);
    } catch (error) {
      deps.logger.warn("could not steer; queueing instead", { id: entry.id, error: errorMessage(error) });
      await deps.lifecycle.pending(entry.id).catch(() => {});
    }
    return false;
  }

  /**
   * An attempt failed and the turn is tried again: what steered it and was not taken in is held
   * for the next attempt (what an attempt took in was written with its next write: none, as it
   * failed before any).
   */
  async holdUntaken(): Promise<void> {
    for (const [inboxId, message] of this.steered) {
      if (this.held.some((steer) => steer.inboxId === inboxId)) continue;
      const saved = await this.deps.messagesForInbox(inboxId);
      if (!saved.some((row) => row.message.role === "user")) this.held.push({ inboxId, message });
    }
  }

  /** The messages the next attempt takes in first; they are no longer held. */
  takeHeld(): HeldSteer[] {
    const held = this.held;
    this.held = [];
    return held;
  }

  /**
   * After a turn: steering messages it took in are done (their acknowledgement was the reply).
   * Any that came too late go back to `pending` and are handed to `queue` as turns of their own,
   * whose reply the owner sees later; after a turn that was `stopped`, those that steered it are
   * finished instead, unanswered (the answer to `/stop` said so). `waiting` tells an entry the
   * queue already holds.
   */
  async settle(
    waiting: (id: number) => boolean,
    queue: (entry: InboxEntry) => void,
    stopped = false,
  ): Promise<void> {
    // Nothing was steered since the last settling: no row can be waiting (recovery handles a start).
    if (this.steered.size === 0) return;
    this.held = [];
    // Should this fail, the messages are settled again after the next turn.
    for (const entry of await this.deps.lifecycle.unfinished()) {
      if (entry.status !== "steered" || waiting(entry.id)) continue;
      if (await settleSteer(this.deps, entry)) continue;
      if (stopped && this.steered.has(entry.id)) {
        await this.deps.lifecycle.finish(entry.id, STOPPED_STEER_END);
        continue;
      }
      await this.deps.lifecycle.pending(entry.id);
      queue(entry);
    }
    this.steered.clear();
  }
}
