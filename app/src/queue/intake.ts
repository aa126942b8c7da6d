import type { Logger } from "@stavrobot/common";
import type { Allowlist } from "../allowlist/allowlist.js";
import { isChannel, isOwnerConsole, type Channel } from "../audience.js";
import type { InboxPayload } from "../db/inbox.js";
import type { MessageQueue, Submitted } from "./queue.js";
import type { PeopleRouter } from "./routing.js";

/** A message as a route received it, checked for its shape but not yet admitted. */
export interface IncomingMessage {
  source: string | null;
  sender: string | null;
  /** A bare `/stop`: no files, no audio. */
  isStop: boolean;
  /** Repeats of it are recognised (a channel re-sending an update, an outbox re-posting a result). */
  idempotencyKey?: string | undefined;
  /** Names the `/stop` answer sent back on a channel (so a repeated update answers once). */
  stopKey: string;
  /** What it says, for the owner's notice about someone no agent answers. */
  text: string | undefined;
  /**
   * The turn (inbox id) that started the run a plugin's message reports: the message goes back
   * to that turn's agent and person (`PeopleRouter.resultRoute`). Only a plugin's source carries it.
   */
  turn?: number | undefined;
  /**
   * Builds what is kept of the message, once it is admitted, for the agent it goes to (a route
   * stores inline files then, in that agent's uploads: `undefined` is the main agent, the owner's);
   * `discard` undoes that when the message is not saved, or repeats one already saved.
   */
  payload: (agentId: number | undefined) => Promise<{ payload: InboxPayload; discard: () => Promise<void> }>;
}

export type Taken =
  /** From a channel, and not from anyone on the allowlist: nothing was kept. */
  | { kind: "dropped" }
  /** The owner's `/stop`: the answer (also sent back on their channel). */
  | { kind: "stopped"; response: string }
  | { kind: "accepted"; submitted: Submitted };

export interface IntakeDeps {
  queue: Pick<MessageQueue, "submit" | "stop">;
  allowlist: Pick<Allowlist, "isAllowed" | "isOwner">;
  /** Sends a short text to someone on a channel through the deliveries (the answer to `/stop`). */
  tell: (channel: Channel, recipient: string, text: string, key: string) => Promise<void>;
  /**
   * Where a channel message from anyone but the owner goes (their interlocutor's agent), and a
   * plugin's message about a run a subagent started (back to it).
   */
  people: Pick<PeopleRouter, "route" | "resultRoute">;
  /** Why no turn can run yet (no provider key), or undefined: such a message is refused, not kept. */
  notReady?: () => string | undefined;
  logger: Logger;
}

/** The reason a message is refused before anything is kept (the caller answers 503 with it). */
export class NotReadyError extends Error {}

/**
 * The one way a message comes in, whatever route brought it (`POST /chat`, the Telegram
 * webhook): a channel's message only from someone on the allowlist; the owner's `/stop` stops
 * the running turn instead of becoming a message; with no provider configured, nothing is kept;
 * otherwise the message is saved and queued (or steers the running turn).
 */
export async function takeMessage(deps: IntakeDeps, message: IncomingMessage): Promise<Taken> {
  const { source, sender } = message;
  if (isChannel(source) && !(sender && (await deps.allowlist.isAllowed(source, sender)))) {
    deps.logger.warn("dropped a message from a sender not on the allowlist", { source, sender });
    return { kind: "dropped" };
  }
  // Only the owner may stop a running turn; from anyone else "/stop" is an ordinary message.
  const fromOwner =
    isOwnerConsole(source) ||
    (isChannel(source) && sender !== null && deps.allowlist.isOwner(source, sender));
  if (message.isStop && fromOwner) {
    const response = deps.queue.stop();
    if (isChannel(source) && sender) await deps.tell(source, sender, response, message.stopKey);
    return { kind: "stopped", response };
  }
  let routed: Pick<InboxPayload, "agentId" | "from" | "replyTo"> | undefined;
  if (isChannel(source) && sender !== null && !fromOwner) {
    const route = await deps.people.route(source, sender, async () => message.text);
    if (route.kind === "dropped") return { kind: "dropped" };
    routed = { agentId: route.agentId, from: route.label };
  } else if (message.turn !== undefined && source?.startsWith("plugin:")) {
    routed = await deps.people.resultRoute(message.turn);
  }
  const missing = deps.notReady?.();
  if (missing) throw new NotReadyError(missing);
  const built = await message.payload(routed?.agentId);
  const { discard } = built;
  const payload = routed ? { ...built.payload, ...routed } : built.payload;
  let submitted: Submitted;
  try {
    submitted = await deps.queue.submit(source, sender, payload, message.idempotencyKey);
  } catch (error) {
    await discard();
    throw error;
  }
  // A repeated delivery: the first one already brought its files.
  if (submitted.duplicate) await discard();
  return { kind: "accepted", submitted };
}
