import { HttpError, errorMessage, readValidJson, safeEqual, type Handler } from "@stavrobot/common";
import { parseTelegramUpdate, telegramUpdateSchema } from "./inbound.js";
import { isDatabaseUnavailable } from "../../db/database.js";
import { takeMessage, type IntakeDeps } from "../../queue/intake.js";

/** Telegram's updates are small; the reference's limit. */
export const TELEGRAM_WEBHOOK_LIMIT_BYTES = 1024 * 1024;

export interface TelegramWebhookDeps extends IntakeDeps {
  /** The secret registered with setWebhook (new at every start). */
  secret: string;
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
    try {
      // No `notReady` here: Telegram's message is kept even before a provider is set, and its
      // turn says what is missing.
      await takeMessage(deps, {
        source: "telegram",
        sender: inbound.chatId,
        isStop: inbound.text?.trim().toLowerCase() === "/stop" && inbound.media.length === 0,
        idempotencyKey: `telegram:${inbound.updateId}`,
        stopKey: `stop:telegram:${inbound.updateId}`,
        text: inbound.text,
        // Its files are fetched when its turn runs, into the uploads of the agent it went to.
        payload: async () => ({
          payload: {
            message: inbound.text,
            attachments: [],
            ...(inbound.media.length > 0
              ? { media: inbound.media.map((ref) => ({ channel: "telegram", ref })) }
              : {}),
          },
          discard: async () => {},
        }),
      });
    } catch (error) {
      if (isDatabaseUnavailable(error)) throw new HttpError(503, "Not saved; send it again later");
      deps.logger.error("could not accept a Telegram message", { error: errorMessage(error) });
      throw error;
    }
    return { json: { ok: true } };
  };
}
