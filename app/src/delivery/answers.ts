import { errorMessage, sanitizeText, type Logger } from "@stavrobot/common";
import { destinationFor, startedByNobody, type OwnerContact } from "../audience.js";
import type { InboxEntry, InboxStore, UnseenAnswer } from "../db/inbox.js";
import { MAIN_AGENT_ID } from "../db/messages.js";
import type { Answer } from "../queue/endings.js";
import { EMPTY_REPLY } from "../queue/replies.js";
import type { Channel, DeliveryPayload, DeliveryStore } from "./store.js";
import { notificationTitle } from "./titles.js";
import type { DeliveryWorker } from "./worker.js";

export interface AnswerDeps {
  inbox: InboxStore;
  /** A text for `channel` as the deliveries that carry it, in the channel's format (the channel's own). */
  compose: (channel: Channel, outgoing: { markdown: string }) => DeliveryPayload[];
  store: DeliveryStore;
  worker: DeliveryWorker;
  owner: OwnerContact;
  logger: Logger;
  /**
   * An answer was kept for the owner's console from a turn no person started (nobody waits for
   * it): the open consoles are told at once (`GET /api/events`).
   */
  onKept?: (answer: UnseenAnswer) => void;
}

/**
 * Takes each finished turn's answer to its audience. On a console (the CLI, the web) the answer
 * is the HTTP reply, or is kept for the owner: shown at once by the consoles open (`onKept`), else
 * with the owner's next reply or when a console opens. On Telegram and Signal the agent answers
 * with the send tools; if it sent nothing to that person during the turn, its final text goes
 * anyway, and a failed turn's error always does. Each goes into the deliveries under a key
 * made from the inbox id, so handing over an answer twice (after a crash) queues it once.
 */
export class AnswerDelivery {
  constructor(private readonly deps: AnswerDeps) {}

  async deliver(
    entry: Pick<InboxEntry, "id" | "source" | "sender"> & Partial<Pick<InboxEntry, "payload">>,
    answer: Answer,
  ): Promise<void> {
    const { inbox, store, worker, owner } = this.deps;
    const destination = destinationFor(entry, owner);
    // A subagent's turn no person of its own started (another agent wrote to it, a plugin's result
    // for a run it started with nobody): its text reaches nobody (it speaks through its send
    // tools), never the owner; only a failure is the owner's to hear about.
    if (
      (entry.payload?.agentId ?? MAIN_AGENT_ID) !== MAIN_AGENT_ID &&
      startedByNobody(entry.source) &&
      !entry.payload?.replyTo &&
      answer.kind !== "error"
    ) {
      inbox.noteSeen([entry.id]);
      return;
    }
    if (destination.kind === "console") {
      inbox.noteUnseen(entry.id);
      // A console message's own caller gets its answer in the HTTP reply; nobody waits for these.
      if (startedByNobody(entry.source)) {
        this.deps.onKept?.({
          id: entry.id,
          source: entry.source,
          message: entry.payload?.message ?? "",
          // As the queue saved it.
          response: sanitizeText(answer.kind === "reply" ? answer.text || EMPTY_REPLY : answer.text),
          title: notificationTitle(entry),
        });
      }
      return;
    }
    const { channel, recipient } = destination;
    const quiet =
      answer.kind === "aborted" ||
      (answer.kind === "reply" &&
        (!answer.text.trim() || (await store.sentDuringTurn(entry.id, channel, recipient))));
    if (!quiet) {
      const kind = answer.kind === "error" ? "error" : "answer";
      const payloads = this.deps.compose(channel, { markdown: answer.text });
      await store.add(
        payloads.map((payload, index) => ({
          channel,
          recipient,
          payload,
          key: `${kind}:${entry.id}:${index}`,
          inboxId: entry.id,
        })),
      );
      void worker.kick();
    }
    // Queued (or nothing to say): the console must not show it again.
    inbox.noteSeen([entry.id]);
  }

  /**
   * At start-up: answers of turns that finished just before a crash, before they were handed to
   * the deliveries or kept for the owner (`onKept`: listing one twice changes nothing). Only
   * recent ones: older console replies simply wait for the owner.
   */
  async recover(): Promise<number> {
    let handed = 0;
    for (const entry of await this.deps.inbox.recentUnseen(200)) {
      const destination = destinationFor(entry, this.deps.owner);
      if (destination.kind === "console" && !startedByNobody(entry.source)) continue;
      try {
        await this.deliver(entry, answerOf(entry));
        handed++;
      } catch (error) {
        this.deps.logger.error("could not hand over an earlier answer", {
          id: entry.id,
          error: errorMessage(error),
        });
      }
    }
    return handed;
  }
}

/** A finished entry's answer as its outcome says (an empty reply is kept as a note for the console). */
function answerOf(entry: InboxEntry & { response: string }): Answer {
  switch (entry.outcome) {
    case "error":
      return { kind: "error", text: entry.response };
    case "aborted":
      return { kind: "aborted", text: entry.response };
    case "empty":
      return { kind: "reply", text: "" };
    default:
      return { kind: "reply", text: entry.response };
  }
}
