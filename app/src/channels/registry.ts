import { isChannel, type Channel } from "../audience.js";
import type { ChannelDefinition, Outgoing } from "./channel.js";
import { emailChannel } from "./email/channel.js";
import { signalChannel } from "./signal/channel.js";
import { telegramChannel } from "./telegram/channel.js";
import { whatsappChannel } from "./whatsapp/channel.js";
import type { DeliveryPayload } from "../delivery/store.js";

/** Every channel the assistant speaks, by name: the one list everything else reads. */
export const CHANNELS: Readonly<Record<Channel, ChannelDefinition>> = {
  telegram: telegramChannel,
  signal: signalChannel,
  whatsapp: whatsappChannel,
  email: emailChannel,
};

/** One message → the deliveries that carry it on `channel`, in its format. */
export function composeFor(channel: Channel, outgoing: Outgoing): DeliveryPayload[] {
  return CHANNELS[channel].compose(outgoing);
}

/**
 * Identifiers compare in one form: a channel's as the channel says (Telegram ids as decimal
 * strings, addresses lower-case); a service no channel speaks, trimmed.
 */
export function normalizeIdentifier(service: string, identifier: string): string {
  return isChannel(service) ? CHANNELS[service].normalize(identifier) : identifier.trim();
}

/** The send tool's name of a channel (`send_<name>_message`, or its own, such as `send_email`). */
export function sendToolOf(channel: Channel): string {
  return CHANNELS[channel].toolName ?? `send_${channel}_message`;
}

/** The channel a send tool sends on, if `tool` is one. */
export function channelOfSendTool(tool: string): Channel | undefined {
  return (Object.keys(CHANNELS) as Channel[]).find((channel) => sendToolOf(channel) === tool);
}
