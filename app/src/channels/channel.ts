import type { Logger, Router, ServiceClient } from "@stavrobot/common";
import type { Channel } from "../audience.js";
import type { AppConfig } from "../boot/config.js";
import type { Database } from "../db/database.js";
import type { DeliveryPayload } from "../delivery/store.js";
import type { Check } from "../doctor/checks.js";
import type { ChannelSender } from "../delivery/worker.js";
import type { IntakeDeps } from "../queue/intake.js";
import type { TelegramApi } from "./telegram/api.js";

/** What the assistant wants to send: Markdown text, a file (already copied for the deliveries), or both. */
export interface Outgoing {
  markdown?: string | undefined;
  attachment?: { path: string; name: string } | undefined;
}

/**
 * One channel, said once: its name and how people are identified on it, the largest file it
 * takes, how Markdown becomes its format (and back to plain text), how its sender is made from
 * its configuration, where its people's messages come in, what it keeps doing while the app runs
 * and how it looks on the home page. The send tools, the tool registry, the allowlist, the deliveries and
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
  /** Its send tool's name, when not `send_<name>_message` (the reference's `send_email`). */
  toolName?: string;
  /** Its messages are mails: the send tool takes a subject. */
  mail?: boolean;
  /** One message → the deliveries that carry it, in order, in the channel's format. */
  compose(outgoing: Outgoing): DeliveryPayload[];
  /** A composed delivery's text as plain text (what a notice about it quotes). */
  plainText(payload: DeliveryPayload): string;
  /** Its sender, when it is configured. */
  sender(context: ChannelContext): ChannelSender | undefined;
  /**
   * Its routes on the external port, when it is configured: where people's messages come in (a
   * webhook, public and checked by the channel itself), pages the owner needs. A channel in a
   * sidecar has its messages posted to the internal `POST /chat` instead.
   */
  addRoutes?(router: Router, context: ChannelContext, intake: IntakeDeps): void;
  /** Starts what it does while the app runs (Telegram: registering its webhook); returns its stop. */
  start?(context: ChannelContext): () => void;
  /** Its part of the home page (`GET /api/status`, `channels.<name>`), asked when it is configured. */
  status(context: ChannelContext, siblings: Promise<readonly SiblingHealth[]>): Promise<ConfiguredStatus>;
  /** What `npm run doctor` says of it, from its status: working or not, and what to do. */
  check(status: ConfiguredStatus): Check;
}

/** A configured channel's state as the home page shows it (its own fields beside `configured`). */
export type ConfiguredStatus = { configured: true } & Record<string, unknown>;
export type ChannelStatus = { configured: false } | ConfiguredStatus;

/** Whether a sibling service answered its health check, and what it said (a channel in a sidecar is as up as it). */
export interface SiblingHealth {
  name: string;
  ok: boolean;
  /** e.g. how it isolates untrusted processes, or why it did not answer. */
  detail?: string;
  /** Its `GET /health` answer, when it answered. */
  body?: unknown;
  /** The plugin-runner's MCP servers that keep failing, by name. */
  mcpServersFailing?: string[];
  /**
   * It answers but cannot do its job ("bridge up, signal-cli missing"): what the home page's badge
   * says instead of "up", in the warning colour; `detail` says why and what to do.
   */
  warning?: string;
}

/** What a configured channel may need: its configuration, its clients, where the app is reached. */
export interface ChannelContext {
  config: Readonly<AppConfig>;
  publicHostname: string;
  /** The Telegram Bot API client, when `[telegram]` is configured. */
  telegramApi: TelegramApi | undefined;
  /** The signal-bridge's client, made only when Signal is configured. */
  signalBridge: ServiceClient | undefined;
  /** The whatsapp-bridge's client, made only when WhatsApp is configured. */
  whatsappBridge: ServiceClient | undefined;
  /** The secret Telegram sends back on every webhook call; new at every start. */
  webhookSecret: string;
  /** The database, for a channel's own rows (email's mailbox cursor, its waiting list). */
  db: Database;
  /** The app's internal secret, which a channel signs the owner's decisions with (the model cannot). */
  internalSecret: string;
  /** The uploads of an agent (`undefined`: the main agent's, the owner's). */
  uploadsOf: (agentId: number | undefined) => string;
  /**
   * Tells the owner something once per key (on their push channel, else kept for their console);
   * never on `except` (a channel telling that it broke).
   */
  tellOwner: (text: string, key: string, about: string, except?: Channel) => Promise<void>;
  logger: Logger;
}

/**
 * One delivery holding the Markdown whole and the file, for a channel whose other end formats the
 * Markdown itself (Signal's bridge, a mail's text and HTML parts).
 */
export function composeWhole(outgoing: Outgoing): DeliveryPayload[] {
  const file = outgoing.attachment
    ? { attachmentPath: outgoing.attachment.path, attachmentName: outgoing.attachment.name }
    : {};
  const markdown = outgoing.markdown?.trim() ? outgoing.markdown : undefined;
  return [{ ...file, ...(markdown ? { text: markdown, format: "markdown" as const } : {}) }];
}
