/**
 * Who a turn answers. A person's message is answered where it came from; a turn no person started
 * (a plugin's async result, a cron entry, the coder, an upload) answers the owner: on their first
 * push channel when they have one, else on their console (the next CLI or web reply shows it);
 * but a plugin's result for a run a subagent started answers that subagent's person.
 */

/** Channels the assistant pushes messages to. */
export type Channel = "telegram" | "signal" | "whatsapp" | "email";

/** Sources through which people (the owner, or allowed others) write from their phone. */
export const CHANNEL_SOURCES: readonly Channel[] = ["signal", "telegram", "whatsapp", "email"];

export type Destination = { kind: "channel"; channel: Channel; recipient: string } | { kind: "console" };

/** The owner's identities on the channels that are configured, in the order they are preferred. */
export interface OwnerContact {
  telegram?: string | undefined;
  signal?: string | undefined;
  whatsapp?: string | undefined;
  /** Only an address, never a pattern: a pattern says whose mail counts as the owner's, not where to write. */
  email?: string | undefined;
}

export const CONSOLE: Destination = { kind: "console" };

export function isChannel(source: string | null): source is Channel {
  return source !== null && (CHANNEL_SOURCES as readonly string[]).includes(source);
}

/** The owner at a terminal (`cli`, also what `POST /chat` without a source is stored as) or the web UI. */
export function isOwnerConsole(source: string | null): boolean {
  return source === null || source === "cli" || source === "web";
}

/**
 * A source as shown beside an answer: a firing's `cron:<id>` is shown as `cron` (its text already
 * says "[Cron entry <id> has fired]"); every other source as it is.
 */
export function shownSource(source: string): string {
  return source.startsWith("cron:") ? "cron" : source;
}

/** Sources that are services acting on their own: nobody waits for their answer. */
export function startedByNobody(source: string | null): boolean {
  return (
    source === "cron" ||
    (source?.startsWith("cron:") ?? false) ||
    source === "coder" ||
    source === "upload" ||
    source === "agent" ||
    source === "approval" ||
    (source?.startsWith("plugin:") ?? false)
  );
}

/** The owner's push channels in the order they are preferred. */
const OWNER_CHANNELS: readonly Channel[] = ["telegram", "signal", "whatsapp", "email"];

/**
 * Where the owner is reached when they did not just write: Telegram first, then Signal, then
 * WhatsApp, then email, else their console. `except` is a channel not to use (a notice that the
 * channel itself broke goes by another one).
 */
export function ownerDestination(owner: OwnerContact, except?: Channel): Destination {
  for (const channel of OWNER_CHANNELS) {
    const recipient = owner[channel];
    if (recipient && channel !== except) return { kind: "channel", channel, recipient };
  }
  return CONSOLE;
}

/**
 * Where the answer to a message from `source`/`sender` goes; a turn no person started that names
 * the person it answers (`replyTo`: a plugin's result for a run a subagent started for them) goes
 * to them.
 */
export function destinationFor(
  entry: {
    source: string | null;
    sender: string | null;
    payload?: { replyTo?: { channel: string; recipient: string } | undefined } | undefined;
  },
  owner: OwnerContact,
): Destination {
  if (isChannel(entry.source) && entry.sender) {
    return { kind: "channel", channel: entry.source, recipient: entry.sender };
  }
  const replyTo = entry.payload?.replyTo;
  if (replyTo && isChannel(replyTo.channel)) {
    return { kind: "channel", channel: replyTo.channel, recipient: replyTo.recipient };
  }
  if (startedByNobody(entry.source)) return ownerDestination(owner);
  // The owner's console, or a caller that waited for the reply over HTTP; a reply nobody received
  // is shown with the owner's next console reply.
  return CONSOLE;
}

export function sameDestination(a: Destination, b: Destination): boolean {
  if (a.kind === "console" || b.kind === "console") return a.kind === b.kind;
  return a.channel === b.channel && a.recipient === b.recipient;
}

/** Whether this message is the owner talking: from their console, or from one of their own identities. */
export function isOwnerMessage(
  entry: { source: string | null; sender: string | null },
  owner: OwnerContact,
): boolean {
  if (isOwnerConsole(entry.source)) return true;
  return isChannel(entry.source) && entry.sender !== null && owner[entry.source] === entry.sender;
}

/**
 * The owner's new message may steer the running turn only if that turn is an owner conversation
 * answered where the owner is now writing. Anything else (a plugin's result running, someone
 * else's message, the owner writing from another channel) waits for its own turn, so its reply is
 * never swallowed by a turn whose answer goes elsewhere.
 */
export function maySteer(
  running: { source: string | null; sender: string | null },
  incoming: { source: string | null; sender: string | null },
  owner: OwnerContact,
): boolean {
  if (!isOwnerMessage(running, owner) || !isOwnerMessage(incoming, owner)) return false;
  return sameDestination(destinationFor(running, owner), destinationFor(incoming, owner));
}
