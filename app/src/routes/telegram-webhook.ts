import {
  HttpError,
  errorMessage,
  readValidJson,
  safeEqual,
  type Handler,
  type Logger,
} from "@stavrobot/common";
import type { Allowlist } from "../allowlist/allowlist.js";
import { parseTelegramUpdate, telegramUpdateSchema } from "../channels/telegram/inbound.js";
import { isDatabaseUnavailable } from "../db/database.js";
import type { MessageQueue } from "../queue/queue.js";

/** Telegram's updates are small; the reference's limit. */
export const TELEGRAM_WEBHOOK_LIMIT_BYTES = 1024 * 1024;

export interface TelegramWebhookDeps {
  /** The secret registered with setWebhook (new at every start). */
  secret: string;
  allowlist: Allowlist;
  queue: MessageQueue;
  /** Sends a short text to someone on a channel through the delivery outbox (the answer to `/stop`). */
  tell: (channel: "telegram", recipient: string, text: string, key: string) => Promise<void>;
  logger: Logger;
}

/**
 * `POST /telegram/webhook` (public: Telegram cannot log in). Only calls carrying the secret
 * registered with setWebhook are taken. The message is saved in the inbox before Telegram gets
 * its 200, so nothing is lost; its files are fetched when its turn runs. If the message cannot
 * be saved, Telegram gets an error and sends the update again later.
 */
export function createTelegramWebhookHandler(deps: TelegramWebhookDeps): Handler {
  return async ({ req }) => {
    const given = req.headers["x-telegram-bot-api-secret-token"];
    if (typeof given !== "string" || !safeEqual(given, deps.secret)) throw new HttpError(403, "Forbidden");
    const update = await readValidJson(req, TELEGRAM_WEBHOOK_LIMIT_BYTES, telegramUpdateSchema);
    const inbound = parseTelegramUpdate(update);
    if (!inbound) return { json: { ok: true } };
    if (!(await deps.allowlist.isAllowed("telegram", inbound.chatId))) {
      deps.logger.warn("dropped a Telegram message from a chat not on the allowlist", {
        chatId: inbound.chatId,
      });
      return { json: { ok: true } };
    }
    if (
      inbound.text?.trim().toLowerCase() === "/stop" &&
      inbound.media.length === 0 &&
      deps.allowlist.isOwner("telegram", inbound.chatId)
    ) {
      await deps.tell("telegram", inbound.chatId, deps.queue.stop(), `stop:telegram:${inbound.updateId}`);
      return { json: { ok: true } };
    }
    try {
      await deps.queue.submit(
        "telegram",
        inbound.chatId,
        {
          message: inbound.text,
          attachments: [],
          ...(inbound.media.length > 0 ? { media: inbound.media } : {}),
        },
        `telegram:${inbound.updateId}`,
      );
    } catch (error) {
      if (isDatabaseUnavailable(error)) throw new HttpError(503, "Not saved; send it again later");
      deps.logger.error("could not accept a Telegram message", { error: errorMessage(error) });
      throw error;
    }
    return { json: { ok: true } };
  };
}
