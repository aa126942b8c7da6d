import type { Logger } from "@stavrobot/common";
import type { Allowlist } from "../allowlist/allowlist.js";
import { isChannel, isOwnerConsole, type Channel } from "../audience.js";
import type { InboxPayload } from "../db/inbox.js";
import type { PromptCommandResult } from "../plugins/prompt-command.js";
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
  allowlist: Pick<Allowlist, "isAllowed" | "isOwner" | "lists">;
  /** Sends a short text to someone on a channel through the deliveries (the answer to `/stop`). */
  tell: (channel: Channel, recipient: string, text: string, key: string) => Promise<void>;
  /**
   * Where a channel message from anyone but the owner goes (their interlocutor's agent), and a
   * plugin's message about a run a subagent started (back to it).
   */
  people: Pick<PeopleRouter, "route" | "resultRoute">;
  /** Why no turn can run yet (no provider key), or undefined: such a message is refused, not kept. */
  notReady?: () => string | undefined;
  /** The owner's "/approve N" and "/deny N" (trust/decisions.ts): the answer, or undefined for another text. */
  approvals?: { command(text: string | undefined): Promise<string | undefined> };
  /**
   * The owner's "/prompt <server> <name> key=value …" (plugins/prompt-command.ts): an answer, the
   * MCP server's prompt as their message, or undefined for another text.
   */
  prompts?: { command(text: string | undefined): Promise<PromptCommandResult | undefined> };
  /**
   * The owner's "/answer <id> key=value …", "/decline <id>" and "/cancel <id>" to an MCP server's
   * question (plugins/questions.ts): the answer, or undefined for another text.
   */
  questions?: { command(text: string | undefined): Promise<string | undefined> };
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
  // The owner deciding on a call the trust gate stopped: answered here, never a message to the model.
  if (fromOwner && deps.approvals) {
    const decided = await deps.approvals.command(message.text);
    if (decided !== undefined) {
      if (isChannel(source) && sender)
        await deps.tell(source, sender, decided, message.stopKey.replace(/^stop:/, "decision:"));
      return { kind: "stopped", response: decided };
    }
  }
  // The owner answering an MCP server's question: handed to the runner at once, even while the
  // turn whose tool the server runs waits for it; never a message to the model. From anyone
  // else these words are an ordinary message: only the owner answers a server.
  if (fromOwner && deps.questions) {
    const said = await deps.questions.command(message.text);
    if (said !== undefined) {
      if (isChannel(source) && sender)
        await deps.tell(source, sender, said, message.stopKey.replace(/^stop:/, "question:"));
      return { kind: "stopped", response: said };
    }
  }
  // The owner asking for an MCP server's prompt: its text becomes their message; a mistake is
  // answered at once, never a message to the model.
  let prompt: Pick<InboxPayload, "message" | "attachments" | "outside"> | undefined;
  if (fromOwner && deps.prompts) {
    const asked = await deps.prompts.command(message.text);
    if (asked?.kind === "answer") {
      if (isChannel(source) && sender)
        await deps.tell(source, sender, asked.text, message.stopKey.replace(/^stop:/, "prompt:"));
      return { kind: "stopped", response: asked.text };
    }
    // The server wrote the prompt's words: the turn holds outside text (trust/gate.ts).
    if (asked) prompt = { message: asked.text, attachments: asked.attachments, outside: asked.origin };
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
  const own = prompt
    ? {
        ...built.payload,
        message: prompt.message,
        attachments: [...built.payload.attachments, ...prompt.attachments],
        outside: prompt.outside,
      }
    : built.payload;
  const payload = routed ? { ...own, ...routed } : own;
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
