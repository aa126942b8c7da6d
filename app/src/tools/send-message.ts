import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import { lstat } from "node:fs/promises";
import type { Allowlist } from "../allowlist/allowlist.js";
import type { Channel } from "../audience.js";
import type { ChannelDefinition } from "../channels/channel.js";
import { CHANNELS, normalizeIdentifier, sendToolOf } from "../channels/registry.js";
import type { DeliveryFiles } from "../delivery/files.js";
import type { DeliveryStore } from "../delivery/store.js";
import type { DeliveryWorker, SendResult } from "../delivery/worker.js";
import { FileAreaError, type FileAreas } from "../files/areas.js";
import type { Queryable } from "../db/database.js";
import { MAIN_AGENT_ID, interlocutorByIdentity, interlocutorByName } from "../db/people.js";
import { ToolError, textResult } from "./result.js";

const parameters = Type.Object({
  recipient: Type.String({
    description:
      "A person's display name (manage_interlocutors; the owner's too), or a chat id / phone number / address on the allowlist.",
  }),
  subject: Type.Optional(Type.String({ description: "The subject of the mail (email only)." })),
  message: Type.Optional(Type.String({ description: "The text, in Markdown." })),
  attachmentPath: Type.Optional(Type.String({ description: "Path of a file to send." })),
});

/** A mail's parameters, as the reference's `send_email` takes them. */
const mailParameters = Type.Object({
  recipient: Type.String({
    description:
      "A person's display name (manage_interlocutors; the owner's too), or an address on the allowlist.",
  }),
  subject: Type.String({ description: "The subject of the mail." }),
  message: Type.String({ description: "The text, in Markdown (sent as text with an HTML part)." }),
  attachmentPath: Type.Optional(Type.String({ description: "Path of a file to send." })),
});

/** How long a send tool waits for the first attempt before reporting the message as queued. */
const FIRST_ATTEMPT_WAIT_MS = 20_000;

export interface SendToolDeps {
  channel: Channel;
  allowlist: Allowlist;
  owner: { name: string | undefined; id: string | undefined };
  areas: FileAreas;
  deliveryFiles: DeliveryFiles;
  store: DeliveryStore;
  worker: DeliveryWorker;
  /** The inbox id of the running turn (ties the sends to it: the turn then owes no fallback answer). */
  currentInboxId: () => number | undefined;
  /** The agent whose turn runs: a subagent reaches only the interlocutors assigned to it. */
  currentAgentId: () => number;
  /** Where interlocutors are looked up (display names, disabled records, assignments). */
  db: Queryable;
}

/**
 * `send_telegram_message` / `send_signal_message`: the only way an answer reaches someone on a
 * channel. Recipients are the owner (by name) or identifiers on the allowlist, files come from the
 * file areas only, and every message goes through the deliveries: it is attempted at once,
 * and if the channel is down it is kept and retried, so the tool never loses it.
 */
export function createSendMessageTool(
  deps: SendToolDeps,
): AgentTool<typeof parameters> & { precheck(params: unknown): Promise<void> } {
  const info = CHANNELS[deps.channel];
  /** The refusals that need no sending: what is sent, to whom, and that they are allowed. */
  const checked = async (params: {
    recipient: string;
    subject?: string;
    message?: string;
    attachmentPath?: string;
  }) => {
    if (info.mail && !params.subject?.trim()) throw new ToolError("'subject' must not be empty.");
    const message = params.message?.trim() ? params.message : undefined;
    if (!message && !params.attachmentPath?.trim()) {
      throw new ToolError("At least one of 'message' or 'attachmentPath' must be present.");
    }
    const { id, label } = await resolveRecipient(params.recipient, deps, info);
    if (!(await deps.allowlist.isAllowed(deps.channel, id))) {
      throw new ToolError(
        `${id} is not on the ${info.title} allowlist, so it cannot be messaged. Only the owner can add it (Settings → Allowlist).`,
      );
    }
    return { message, id, label };
  };
  return {
    name: sendToolOf(deps.channel),
    label: `Send ${info.title} message`,
    description: info.mail
      ? `Send a mail (subject, Markdown text, optionally a file) to the owner or to someone on the ${info.title} allowlist.`
      : `Send a ${info.title} message (Markdown text and/or a file) to the owner or to someone on the ${info.title} allowlist.`,
    parameters: info.mail ? (mailParameters as unknown as typeof parameters) : parameters,
    // What the trust gate lets the tool refuse first: a call that could never be sent.
    precheck: async (params: unknown) => {
      await checked(
        params as { recipient: string; subject?: string; message?: string; attachmentPath?: string },
      );
    },
    async execute(toolCallId, params) {
      const { message, id, label } = await checked(params);
      const attachment = params.attachmentPath?.trim()
        ? await deps.deliveryFiles.take(await locateFile(params.attachmentPath, deps.areas, info))
        : undefined;
      const inboxId = deps.currentInboxId();
      const added = await deps.store.add(
        info.compose({ markdown: message, attachment }).map((payload, index) => ({
          channel: deps.channel,
          recipient: id,
          payload: info.mail && params.subject ? { ...payload, subject: params.subject.trim() } : payload,
          key: `send:${inboxId ?? "none"}:${toolCallId}:${index}`,
          inboxId: inboxId ?? null,
        })),
      );
      if (added.length === 0) {
        if (attachment) await deps.deliveryFiles.discard(attachment.path);
        return textResult(`This message to ${label} was already sent.`);
      }
      const results = await deps.worker.attemptSoon(
        added.map((delivery) => delivery.id),
        FIRST_ATTEMPT_WAIT_MS,
      );
      return report(results, label, info.title);
    },
  };
}

/**
 * The recipient pipeline (the reference's): a display name is that interlocutor's identity on this
 * channel, a raw identifier is checked against the interlocutor it belongs to; a disabled
 * interlocutor is refused, and a subagent may message only the interlocutors assigned to it. The
 * main agent may also name the owner ("owner") or any identifier on the allowlist (checked next).
 */
async function resolveRecipient(
  recipient: string,
  deps: SendToolDeps,
  info: ChannelDefinition,
): Promise<{ id: string; label: string }> {
  // Invisible characters (copied from a contact card) and spaces in phone numbers are not part of the id.
  const text = recipient.replace(/[\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]/g, "").trim();
  const agentId = deps.currentAgentId();
  const subagent = agentId !== MAIN_AGENT_ID;
  const notAssigned = (name: string) =>
    new ToolError(
      `Error: "${name}" is not assigned to you: you can only message the interlocutors assigned to your agent. Ask the main agent with send_agent_message.`,
    );
  const named = text ? await interlocutorByName(deps.db, text, deps.channel) : undefined;
  if (named) {
    if (!named.enabled) throw new ToolError(`Error: Interlocutor "${named.display_name}" is disabled.`);
    if (subagent && named.agent_id !== agentId) throw notAssigned(named.display_name);
    if (named.identifier) return { id: named.identifier, label: named.display_name };
    if (!named.owner) {
      throw new ToolError(
        `Error: Interlocutor "${named.display_name}" has no ${info.title} identity. Add one with manage_interlocutors add_identity, or use another channel.`,
      );
    }
  }
  const owner = deps.owner;
  if (text.toLowerCase() === "owner" || (owner.name && text.toLowerCase() === owner.name.toLowerCase())) {
    if (subagent) throw notAssigned(text);
    if (!owner.id) {
      throw new ToolError(
        `The owner has no ${info.title} identity configured ([owner] ${deps.channel} in config.toml), so they cannot be reached on ${info.title}.`,
      );
    }
    return { id: owner.id, label: owner.name ?? "the owner" };
  }
  const phone = deps.channel === "signal" || deps.channel === "whatsapp";
  const compact = phone ? text.replace(/[\s().-]/g, "") : text;
  if (!info.isId(compact)) {
    throw new ToolError(
      `Unknown recipient "${recipient}". Use the owner's name${owner.name ? ` ("${owner.name}")` : ""} or a ${info.idDescription} on the allowlist.`,
    );
  }
  const id = normalizeIdentifier(deps.channel, compact);
  const person = await interlocutorByIdentity(deps.db, deps.channel, id);
  if (person && !person.enabled)
    throw new ToolError(`Error: Interlocutor "${person.display_name}" is disabled.`);
  if (subagent && person?.agent_id !== agentId) throw notAssigned(person?.display_name ?? id);
  return { id, label: id === owner.id && owner.name ? owner.name : (person?.display_name ?? id) };
}

async function locateFile(path: string, areas: FileAreas, info: ChannelDefinition): Promise<string> {
  let resolved: string;
  try {
    resolved = await areas.resolve(path);
  } catch (error) {
    if (error instanceof FileAreaError) throw new ToolError(error.message);
    throw error;
  }
  const stat = await lstat(resolved).catch(() => undefined);
  if (!stat?.isFile()) throw new ToolError(`File not found: ${path}`);
  if (stat.size > info.maxAttachmentBytes) {
    throw new ToolError(
      `${path} is too large for ${info.title} (at most ${info.maxAttachmentBytes / 1024 / 1024} MB).`,
    );
  }
  return resolved;
}

function report(
  results: (SendResult | undefined)[],
  label: string,
  title: string,
): ReturnType<typeof textResult> {
  const refused = results.find((result) => result && !result.ok && !result.retry);
  if (refused && !refused.ok)
    throw new ToolError(`${title} refused the message to ${label}: ${refused.error}`);
  if (results.every((result) => result?.ok)) return textResult(`Message sent to ${label} on ${title}.`);
  const problem = results.find((result) => result && !result.ok);
  const why = problem && !problem.ok ? ` (${problem.error})` : "";
  return textResult(
    `${title} did not take the message to ${label} yet${why}. It is queued and will be sent automatically when ${title} is reachable; do not send it again.`,
  );
}
