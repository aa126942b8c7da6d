import type { ServiceClient } from "@stavrobot/common";
import type { Channel } from "../audience.js";
import type { AppConfig } from "../boot/config.js";
import type { DeliveryPayload } from "../delivery/store.js";
import type { ChannelSender } from "../delivery/worker.js";
import type { TelegramApi } from "./telegram/api.js";

/** What the assistant wants to send: Markdown text, a file (already copied into the outbox), or both. */
export interface Outgoing {
  markdown?: string | undefined;
  attachment?: { path: string; name: string } | undefined;
}

/**
 * One channel, said once: its name and how people are identified on it, the largest file it
 * takes, how Markdown becomes its format (and back to plain text), how its sender is made from
 * its configuration. The send tools, the tool registry, the allowlist, the delivery outbox and
 * the status page read these (`registry.ts`); nothing else knows a channel by name.
 *
 * A channel lives in the app when the app can speak its protocol itself over HTTP (Telegram's
 * Bot API, a webhook); it lives in a sidecar service when it needs a program of its own next to
 * it (Signal: signal-cli, a Java daemon holding the account's keys), which the app reaches
 * through a contract in `common` like any sibling (`signal-bridge`).
 */
export interface ChannelDefinition {
  name: Channel;
  /** As people read it: "Telegram". */
  title: string;
  /** Whether config.toml configures it (its section is there). */
  configured(config: Readonly<AppConfig>): boolean;
  /** What an identifier looks like, for error messages. */
  idDescription: string;
  isId(text: string): boolean;
  /** The one form identifiers are compared in. */
  normalize(identifier: string): string;
  /** The largest file it takes. */
  maxAttachmentBytes: number;
  /** One message → the deliveries that carry it, in order, in the channel's format. */
  compose(outgoing: Outgoing): DeliveryPayload[];
  /** A composed delivery's text as plain text (what a notice about it quotes). */
  plainText(payload: DeliveryPayload): string;
  /** Its sender, when it is configured. */
  sender(context: SenderContext): ChannelSender | undefined;
}

/** What a channel's sender may need: its configuration and where the app is reached. */
export interface SenderContext {
  config: Readonly<AppConfig>;
  publicHostname: string;
  /** The Telegram Bot API client, when `[telegram]` is configured. */
  telegramApi: TelegramApi | undefined;
  /** The signal-bridge's client, made only when Signal is configured. */
  signalBridge: ServiceClient | undefined;
}
