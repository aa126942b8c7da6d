import type { Channel } from "../audience.js";
import type { ChannelDefinition, Outgoing } from "./channel.js";
import { signalChannel } from "./signal/channel.js";
import { telegramChannel } from "./telegram/channel.js";
import type { DeliveryPayload } from "../delivery/store.js";

/** Every channel the assistant speaks, by name: the one list everything else reads. */
export const CHANNELS: Readonly<Record<Channel, ChannelDefinition>> = {
  telegram: telegramChannel,
  signal: signalChannel,
};

/** One message → the deliveries that carry it on `channel`, in its format. */
export function composeFor(channel: Channel, outgoing: Outgoing): DeliveryPayload[] {
  return CHANNELS[channel].compose(outgoing);
}
