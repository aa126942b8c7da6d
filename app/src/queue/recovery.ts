import type { InboxEntry } from "../db/inbox.js";
import type { StoredMessage } from "../db/messages.js";
import type { Ending } from "./endings.js";
import { STEERED_END, failed, replied } from "./endings.js";
import type { InboxLifecycle } from "./lifecycle.js";
import { CRASHED_REPLY, INTERRUPTED_REPLY } from "./replies.js";

/** What recovery needs of the queue: the inbox's lifecycle, the saved messages, and how to end or queue an entry. */
export interface RecoveryContext {
  lifecycle: InboxLifecycle;
  messagesForInbox: (inboxId: number) => Promise<StoredMessage[]>;
  /** Finishes an entry and hands its answer to its audience. */
  conclude: (entry: InboxEntry, ending: Ending) => Promise<void>;
  maxRetries: number;
}

/**
 * What an unfinished entry left by a stopped process becomes at the next start: queued again
 * ("run"), or finished here ("settled"):
 * - a steering message its turn took in is done; one it did not take goes back to `pending`;
 * - a turn that saved an assistant or tool-result message is not replayed (a tool may have had
 *   effects): a final answer is its reply, anything else fails saying why;
 * - one attempted more often than `maxRetries` keeps taking the process down: it fails.
 */
export async function recoverEntry(ctx: RecoveryContext, entry: InboxEntry): Promise<"run" | "settled"> {
  const saved = await ctx.messagesForInbox(entry.id);
  if (entry.status === "steered") {
    if (await settleSteer(ctx, entry)) return "settled";
    await ctx.lifecycle.pending(entry.id);
    return "run";
  }
  if (saved.some((row) => row.message.role !== "user")) {
    await ctx.conclude(entry, interruptedEnding(saved));
    return "settled";
  }
  if (entry.attempts > ctx.maxRetries) {
    await ctx.conclude(entry, failed(CRASHED_REPLY, `gave up after ${entry.attempts} attempts`));
    return "settled";
  }
  return "run";
}

/** A steering message whose turn saved it is done (true); otherwise it still needs a turn (false). */
export async function settleSteer(
  ctx: Pick<RecoveryContext, "lifecycle" | "messagesForInbox">,
  entry: InboxEntry,
): Promise<boolean> {
  const saved = await ctx.messagesForInbox(entry.id);
  if (!saved.some((row) => row.message.role === "user")) return false;
  await ctx.lifecycle.finish(entry.id, STEERED_END);
  return true;
}

/** A turn cut off after it saved work: its final answer if it got that far, else a failure. */
function interruptedEnding(saved: StoredMessage[]): Ending {
  const last = saved[saved.length - 1]?.message;
  if (last?.role === "assistant" && !last.content.some((block) => block.type === "toolCall")) {
    const text = last.content
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("\n");
    // As before this column: the answer's text as it was, even when empty.
    return { ...replied(text), end: { status: "done", response: text, outcome: text ? "reply" : "empty" } };
  }
  return failed(INTERRUPTED_REPLY, "interrupted after tool results were saved");
}
