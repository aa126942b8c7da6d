/**
 * Text formatting for the Telegram channel, all pure functions:
 * - `markdownToTelegramHtml`: the agent's Markdown → the small HTML subset of `parse_mode: "HTML"`;
 * - `splitTelegramHtml`: that HTML → chunks that each fit in one message and are well-formed alone;
 * - `telegramEntitiesToMarkdown`: an incoming text + its entities → Markdown for the agent.
 */

export { escapeHtml, markdownToTelegramHtml } from "./markdown-html.js";
export { splitTelegramHtml, TELEGRAM_MESSAGE_LIMIT } from "./split.js";
export { telegramEntitiesToMarkdown } from "./entities.js";
export type { TelegramEntity } from "./entities.js";
