import type { ChannelDefinition } from "../channel.js";
import { registerWebhook } from "./registration.js";
import { htmlToPlainText, markdownToTelegramHtml } from "./markdown-html.js";
import { TELEGRAM_CAPTION_LIMIT, TelegramSender } from "./sender.js";
import { splitTelegramHtml } from "./split.js";
import { telegramCheck, telegramStatus, webhookUrl, type TelegramStatus } from "./status.js";
import { createTelegramWebhookHandler } from "./webhook.js";

/** The Bot API's limit for a file a bot sends. */
const TELEGRAM_ATTACHMENT_LIMIT_BYTES = 50 * 1024 * 1024;

/**
 * Telegram, in the app: the Bot API over HTTP, a webhook for what people send. Markdown becomes
 * the small HTML subset of `parse_mode: "HTML"`, split into messages under 4096 characters (the
 * first one the file's caption when it fits in 1024); the sender falls back to the same text as
 * plain text should Telegram refuse the HTML.
 */
export const telegramChannel: ChannelDefinition = {
  name: "telegram",
  title: "Telegram",
  configured: (config) => config.telegram !== undefined,
  idDescription: "numeric chat id",
  isId: (text) => /^-?\d{1,20}$/.test(text),
  normalize: (identifier) => {
    const trimmed = identifier.trim();
    return /^-?\d+$/.test(trimmed) ? String(BigInt(trimmed)) : trimmed;
  },
  maxAttachmentBytes: TELEGRAM_ATTACHMENT_LIMIT_BYTES,
  compose(outgoing) {
    const file = outgoing.attachment
      ? { attachmentPath: outgoing.attachment.path, attachmentName: outgoing.attachment.name }
      : {};
    const markdown = outgoing.markdown?.trim() ? outgoing.markdown : undefined;
    const chunks = markdown ? splitTelegramHtml(markdownToTelegramHtml(markdown)) : [];
    const texts = chunks.map((text) => ({ text, format: "html" as const }));
    if (!outgoing.attachment) return texts;
    const [first, ...rest] = texts;
    if (first && first.text.length <= TELEGRAM_CAPTION_LIMIT) return [{ ...file, ...first }, ...rest];
    return [file, ...texts];
  },
  plainText: (payload) =>
    payload.text === undefined
      ? ""
      : payload.format === "html"
        ? htmlToPlainText(payload.text)
        : payload.text,
  sender: ({ telegramApi }) =>
    telegramApi ? new TelegramSender(telegramApi, telegramChannel.plainText) : undefined,
  addRoutes(router, { webhookSecret, logger }, intake) {
    // Telegram cannot log in: the handler checks the secret registered with setWebhook. No
    // `notReady`: a Telegram message is kept even before a provider is set, and its turn says so.
    const { queue, allowlist, people, tell, approvals, questions } = intake;
    router.post(
      "/telegram/webhook",
      createTelegramWebhookHandler({
        queue,
        allowlist,
        people,
        tell,
        ...(approvals ? { approvals } : {}),
        ...(questions ? { questions } : {}),
        secret: webhookSecret,
        logger: logger.child("telegram"),
      }),
      { public: true },
    );
  },
  start: ({ telegramApi, publicHostname, webhookSecret, logger }) =>
    telegramApi
      ? registerWebhook(telegramApi, {
          url: webhookUrl(publicHostname),
          secret: webhookSecret,
          logger: logger.child("telegram"),
        })
      : () => {},
  status: async ({ telegramApi, publicHostname }) =>
    telegramApi ? telegramStatus(telegramApi, publicHostname) : { configured: true },
  check: (status) => telegramCheck(status as TelegramStatus),
};
