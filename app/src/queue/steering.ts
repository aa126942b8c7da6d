import { errorMessage } from "@stavrobot/common";
import type { InboxEntry, InboxPayload } from "../db/inbox.js";
import type { QueueDeps } from "./contracts.js";
import { settleSteer } from "./recovery.js";

/**
 * The owner talking while the assistant works: a new message of theirs joins the running turn
 * (`engine.steer`) instead of waiting, when that turn is theirs and answered where they write
 * (`maySteer`). Whether the turn took it in is settled after the turn: done if it did, queued as
 * a turn of its own if it came too late.
 */
export class Steering {
  /** Whether a message steered a turn since steering was last settled. */
  private since = false;

  constructor(
    private readonly deps: Pick<
      QueueDeps,
      "engine" | "lifecycle" | "buildUserMessage" | "maySteer" | "messagesForInbox" | "logger"
    >,
  ) {}

  /** Steers the turn running for `running` with the saved `entry`; false when it cannot (it waits its turn). */
  async steer(running: InboxEntry | undefined, entry: InboxEntry, payload: InboxPayload): Promise<boolean> {
    const { deps } = this;
    if (
      !running ||
      !deps.engine.busy ||
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
      this.since = true;
      if (deps.engine.steer(entry.id, message)) return true;
      await deps.lifecycle.pending(entry.id);
    } catch (error) {
      deps.logger.warn("could not steer; queueing instead", { id: entry.id, error: errorMessage(error) });
      await deps.lifecycle.pending(entry.id).catch(() => {});
    }
    return false;
  }

  /**
   * After a turn: steering messages it took in are done (their acknowledgement was the reply);
   * any that came too late go back to `pending` and are handed to `queue` as turns of their own,
   * whose reply the owner sees later. `waiting` tells an entry the queue already holds.
   */
  async settle(waiting: (id: number) => boolean, queue: (entry: InboxEntry) => void): Promise<void> {
    // Nothing was steered since the last settling: no row can be waiting (recovery handles a start).
    if (!this.since) return;
    this.since = false;
    try {
      for (const entry of await this.deps.lifecycle.unfinished()) {
        if (entry.status !== "steered" || waiting(entry.id)) continue;
        if (await settleSteer(this.deps, entry)) continue;
        await this.deps.lifecycle.pending(entry.id);
        queue(entry);
      }
    } catch (error) {
      this.since = true;
      throw error;
    }
  }
}
