import { randomBytes } from "node:crypto";
import type { Logger, Router, ServiceClient } from "@stavrobot/common";
import { Allowlist } from "../allowlist/allowlist.js";
import { ownerDestination, type Channel, type OwnerContact } from "../audience.js";
import type { AppConfig } from "../boot/config.js";
import type { Database } from "../db/database.js";
import type { InboxStore, UnseenAnswer } from "../db/inbox.js";
import { AnswerDelivery } from "../delivery/answers.js";
import { DeliveryStore } from "../delivery/store.js";
import { OwnerFallback } from "../delivery/owner-fallback.js";
import { DeliveryWorker, type ChannelSender } from "../delivery/worker.js";
import type { Check } from "../doctor/checks.js";
import type { IntakeDeps } from "../queue/intake.js";
import type { ChannelContext, ChannelStatus, SiblingHealth } from "./channel.js";
import { CHANNELS, composeFor, normalizeIdentifier } from "./registry.js";
import { TelegramApi } from "./telegram/api.js";
import { TelegramMediaFetcher } from "./telegram/media.js";

export interface ChannelWiringDeps {
  config: AppConfig;
  db: Database;
  inbox: InboxStore;
  internalSecret: string;
  publicHostname: string;
  /** The uploads of an agent (`undefined`: the main agent's, the owner's): a contact's files land in their agent's. */
  uploadsOf: (agentId: number | undefined) => string;
  /** The signal-bridge's client, made only when Signal is configured. */
  signalBridge: () => ServiceClient;
  /** The whatsapp-bridge's client, made only when WhatsApp is configured. */
  whatsappBridge: () => ServiceClient;
  /** An answer or a notice was kept for the owner's console with nobody waiting for it. */
  onKept?: (answer: UnseenAnswer) => void;
  /** A message kept for the owner's console (its channel could not deliver it) reached them there after all. */
  onDeliveredLater?: (keptInboxId: number) => Promise<void>;
  logger: Logger;
}

/** The channels, the owner, the allowlist and the deliveries, as one configuration has them. */
export interface ChannelWiring {
  /** The owner's identifiers, whether or not their channel is configured. */
  ownerIds: {
    telegram: string | undefined;
    signal: string | undefined;
    whatsapp: string | undefined;
    email: string | undefined;
  };
  /** How the owner is reached: only through the channels that are configured. */
  ownerContact: OwnerContact;
  allowlist: Allowlist;
  /** The signal-bridge's client when Signal is configured (the home page asks its health). */
  signalBridge: ServiceClient | undefined;
  /** The whatsapp-bridge's client when WhatsApp is configured. */
  whatsappBridge: ServiceClient | undefined;
  deliveries: DeliveryStore;
  worker: DeliveryWorker;
  answers: AnswerDelivery;
  /** Sends a short text to someone on a channel, through the deliveries. */
  tell: (channel: Channel, recipient: string, text: string, key: string) => Promise<void>;
  /** Keeps a note for the owner's console (not the answer to a message), telling the open consoles. */
  notices: { addNotice(source: string, about: string, text: string): Promise<void> };
  /** Fetches a Telegram message's files when its turn starts (Telegram only). */
  mediaFetcher: TelegramMediaFetcher | undefined;
  /** Adds the configured channels' routes (their inbound webhooks, their pages). */
  addRoutes(router: Router, intake: IntakeDeps): void;
  /** Starts what the configured channels do while the app runs; returns how to stop them all. */
  start(): () => void;
  /** What the doctor says of each configured channel, from the channels' parts of the status. */
  checks(channels: Record<Channel, ChannelStatus>): Check[];
  /** Every channel's part of the home page, by name. */
  status(siblings: Promise<readonly SiblingHealth[]>): Promise<Record<Channel, ChannelStatus>>;
}

/**
 * Builds what reaches people: the configured channels' senders, the deliveries' worker that sends
 * through them (a message it gives up on becomes a notice to the owner), the answers' delivery and
 * the allowlist (copied once from config.toml's legacy lists). Nothing is sent until the caller
 * starts the worker.
 */
export async function wireChannels(deps: ChannelWiringDeps): Promise<ChannelWiring> {
  const { config, db, inbox, logger } = deps;
  const ownerEmail = config.owner?.email?.trim().toLowerCase();
  const ownerIds = {
    telegram:
      config.owner?.telegram === undefined
        ? undefined
        : normalizeIdentifier("telegram", String(config.owner.telegram)),
    signal: config.owner?.signal,
    whatsapp: config.owner?.whatsapp,
    // An address to write to; a pattern (`*@example.com`) only says whose mail is the owner's.
    email: ownerEmail && !ownerEmail.includes("*") ? ownerEmail : undefined,
  };
  const ownerContact: OwnerContact = {
    telegram: config.telegram ? ownerIds.telegram : undefined,
    signal: config.signal ? ownerIds.signal : undefined,
    whatsapp: config.whatsapp ? ownerIds.whatsapp : undefined,
    email: config.email?.smtpHost ? ownerIds.email : undefined,
  };
  const listOf = (id: string | undefined) => (id ? [id] : []);
  const configured = Object.values(CHANNELS).filter((definition) => definition.configured(config));
  const allowlist = new Allowlist(
    db,
    deps.internalSecret,
    {
      telegram: listOf(ownerIds.telegram),
      signal: listOf(ownerIds.signal),
      whatsapp: listOf(ownerIds.whatsapp),
      email: listOf(ownerEmail),
    },
    logger.child("allowlist"),
    configured.map((definition) => definition.name),
    normalizeIdentifier,
  );
  const imported = await allowlist.importLegacyOnce({
    telegram: config.telegram?.allowedChatIds.map(String),
    signal: config.signal?.allowedNumbers,
  });
  if (imported > 0)
    logger.info("copied the allowlists from config.toml into the settings", { count: imported });
  const telegramApi = config.telegram
    ? new TelegramApi(config.telegram.apiBaseUrl, config.telegram.botToken)
    : undefined;
  const signalBridge = config.signal ? deps.signalBridge() : undefined;
  const whatsappBridge = config.whatsapp ? deps.whatsappBridge() : undefined;
  const context: ChannelContext = {
    config,
    publicHostname: deps.publicHostname,
    telegramApi,
    signalBridge,
    whatsappBridge,
    webhookSecret: randomBytes(32).toString("base64url"),
    db,
    internalSecret: deps.internalSecret,
    uploadsOf: deps.uploadsOf,
    // On the owner's push channel (the key makes it once), else kept for their console.
    tellOwner: async (text, key, about, except) => {
      const to = ownerDestination(ownerContact, except);
      if (to.kind === "channel") await tell(to.channel, to.recipient, text, key);
      else await notices.addNotice("channel", about, text);
    },
    logger,
  };
  const channels: Partial<Record<Channel, ChannelSender>> = {};
  for (const definition of configured) {
    const sender = definition.sender(context);
    if (sender) channels[definition.name] = sender;
  }
  const deliveries = new DeliveryStore(db);
  const notices = {
    async addNotice(source: string, about: string, text: string): Promise<void> {
      deps.onKept?.(await inbox.addNotice(source, about, text));
    },
  };
  const worker = new DeliveryWorker({
    store: deliveries,
    channels,
    logger: logger.child("delivery"),
    // A message the owner's channel cannot deliver is kept for their consoles meanwhile.
    followUp: new OwnerFallback({
      db,
      inbox,
      owner: ownerContact,
      channels: CHANNELS,
      onKept: deps.onKept,
      onDeliveredLater: deps.onDeliveredLater,
      logger: logger.child("delivery"),
    }),
    // A message kept for the owner's consoles is theirs already: no second notice when given up.
    onGiveUp: async (delivery, error) => {
      if (delivery.keptInboxId !== null) return;
      await notices.addNotice(
        "delivery",
        `(a ${delivery.channel} message to ${delivery.recipient})`,
        `A ${delivery.channel} message to ${delivery.recipient} could not be delivered and was given up: ${error}` +
          (delivery.payload.text
            ? `\n\nIt said:\n${CHANNELS[delivery.channel].plainText(delivery.payload)}`
            : ""),
      );
    },
  });
  const answers = new AnswerDelivery({
    inbox,
    compose: composeFor,
    store: deliveries,
    worker,
    owner: ownerContact,
    logger: logger.child("delivery"),
    onKept: deps.onKept,
  });
  const tell = async (channel: Channel, recipient: string, text: string, key: string): Promise<void> => {
    const payloads = composeFor(channel, { markdown: text });
    await deliveries.add(
      payloads.map((payload, index) => ({ channel, recipient, payload, key: `${key}:${index}` })),
    );
    void worker.kick();
  };
  const mediaFetcher = telegramApi
    ? new TelegramMediaFetcher(telegramApi, deps.uploadsOf, inbox, logger.child("telegram"))
    : undefined;
  return {
    ownerIds,
    ownerContact,
    allowlist,
    signalBridge,
    whatsappBridge,
    deliveries,
    worker,
    answers,
    tell,
    notices,
    mediaFetcher,
    addRoutes(router, intake) {
      for (const definition of configured) definition.addRoutes?.(router, context, intake);
    },
    start() {
      const stops = configured.map((definition) => definition.start?.(context));
      return () => stops.forEach((stop) => stop?.());
    },
    checks(statuses) {
      return configured.flatMap((definition) => {
        const status = statuses[definition.name];
        return status.configured ? [definition.check(status)] : [];
      });
    },
    async status(siblings) {
      const entries = await Promise.all(
        Object.values(CHANNELS).map(async (definition): Promise<[Channel, ChannelStatus]> => [
          definition.name,
          configured.includes(definition)
            ? await definition.status(context, siblings)
            : { configured: false },
        ]),
      );
      return Object.fromEntries(entries) as Record<Channel, ChannelStatus>;
    },
  };
}
