import { extname } from "node:path";
import type { Delivery } from "../../delivery/store.js";
import type { ChannelSender, SendResult } from "../../delivery/worker.js";
import { TelegramError, type TelegramApi } from "./api.js";

const IMAGE = new Set([".jpg", ".jpeg", ".png", ".gif", ".webp"]);
/** Sent as voice messages (the reference's list). */
const VOICE = new Set([".mp3", ".ogg", ".oga", ".wav", ".m4a"]);
/** Telegram's limit for a media caption. */
export const TELEGRAM_CAPTION_LIMIT = 1024;

/**
 * Sends one delivery to a Telegram chat: text as HTML (converted and split into chunks that fit
 * before it was queued), a file as a photo, a voice message or a document, with the text as its
 * caption. Should Telegram refuse the HTML, the same text goes again as plain text: a formatting
 * slip must not cost the recipient the message.
 */
export class TelegramSender implements ChannelSender {
  constructor(
    private readonly api: TelegramApi,
    /** A delivery's text as plain text (the channel's own conversion, `telegramChannel.plainText`). */
    private readonly plainText: (payload: Delivery["payload"]) => string,
  ) {}

  async send(delivery: Delivery): Promise<SendResult> {
    try {
      await this.sendOnce(delivery, delivery.payload.format === "html");
      return { ok: true };
    } catch (error) {
      if (delivery.payload.format === "html" && isEntityParseError(error)) {
        try {
          await this.sendOnce(delivery, false);
          return { ok: true };
        } catch (plainError) {
          return classify(plainError);
        }
      }
      return classify(error);
    }
  }

  private async sendOnce(delivery: Delivery, html: boolean): Promise<void> {
    const { recipient, payload } = delivery;
    const text = payload.text && !html ? this.plainText(payload) : payload.text;
    const format = html ? { parse_mode: "HTML" } : {};
    if (payload.attachmentPath) {
      const name = payload.attachmentName ?? payload.attachmentPath;
      const ext = extname(name).toLowerCase();
      const [method, field] = IMAGE.has(ext)
        ? ["sendPhoto", "photo"]
        : VOICE.has(ext)
          ? ["sendVoice", "voice"]
          : ["sendDocument", "document"];
      const caption = text?.trim() ? { caption: text, ...format } : {};
      await this.api.upload(
        method,
        field,
        { path: payload.attachmentPath, name: payload.attachmentName },
        {
          chat_id: recipient,
          ...caption,
        },
      );
    } else if (text?.trim()) {
      // No link preview: Telegram's servers would fetch the address, and an address can carry
      // data out (the trust boundary's side door; ARCHITECTURE.md).
      await this.api.call("sendMessage", {
        chat_id: recipient,
        text,
        ...format,
        link_preview_options: { is_disabled: true },
      });
    }
  }
}

function isEntityParseError(error: unknown): boolean {
  return (
    error instanceof TelegramError &&
    error.status === 400 &&
    /parse entities|unsupported start tag|can't find end/i.test(error.message)
  );
}

/** 429, 5xx and unreachable: later; other 4xx (chat not found, blocked by the user): never. */
function classify(error: unknown): SendResult {
  if (error instanceof TelegramError) {
    if (error.status === 429) {
      return {
        ok: false,
        retry: true,
        error: error.message,
        retryAfterMs: (error.retryAfterSeconds ?? 5) * 1000,
      };
    }
    if (error.status !== undefined && error.status >= 400 && error.status < 500) {
      return { ok: false, retry: false, error: error.message };
    }
    return { ok: false, retry: true, error: error.message };
  }
  return { ok: false, retry: true, error: String(error) };
}
