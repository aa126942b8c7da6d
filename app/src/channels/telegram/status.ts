import { errorMessage } from "@stavrobot/common";
import type { Check } from "../../doctor/checks.js";
import type { TelegramApi } from "./api.js";

/** Telegram's `getWebhookInfo` answer, the fields used here. */
interface WebhookInfo {
  url: string;
  pending_update_count: number;
  last_error_message?: string;
}

/** Telegram's part of the home page: whether its webhook is the one this start registered. */
export type TelegramStatus = {
  configured: true;
  webhook:
    { registered: boolean; url: string; pendingUpdates: number; lastError?: string } | { error: string };
};

/** Where Telegram must send this assistant's updates. */
export function webhookUrl(publicHostname: string): string {
  return `${publicHostname}/telegram/webhook`;
}

/** Asks Telegram about the webhook; a failure to ask is shown in its place, not thrown. */
export async function telegramStatus(api: TelegramApi, publicHostname: string): Promise<TelegramStatus> {
  try {
    const info = await api.call<WebhookInfo>("getWebhookInfo", {});
    return {
      configured: true,
      webhook: {
        registered: info.url === webhookUrl(publicHostname),
        url: info.url,
        pendingUpdates: info.pending_update_count,
        ...(info.last_error_message ? { lastError: info.last_error_message } : {}),
      },
    };
  } catch (error) {
    return { configured: true, webhook: { error: errorMessage(error) } };
  }
}

/** Whether Telegram reaches the assistant: the bot answers, the webhook is ours and is delivered to. */
export function telegramCheck(status: TelegramStatus): Check {
  const name = "telegram";
  const webhook = status.webhook;
  if ("error" in webhook) {
    return {
      name,
      state: "fail",
      detail: `Telegram did not answer: ${webhook.error}`,
      fix: "Check botToken in config.toml (a wrong one is refused) and the network.",
    };
  }
  if (!webhook.registered) {
    return {
      name,
      state: "fail",
      detail: `the webhook is not this assistant's (Telegram has "${webhook.url}")`,
      fix: "Set publicHostname in config.toml to the https address Telegram can reach; the app registers it at start.",
    };
  }
  if (webhook.lastError) {
    return {
      name,
      state: "warn",
      detail: `Telegram's last delivery failed: ${webhook.lastError}`,
      fix: "Telegram must reach publicHostname over https from the internet.",
    };
  }
  return { name, state: "ok", detail: "the bot answers and its webhook is registered" };
}
