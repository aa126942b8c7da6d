import { errorMessage } from "@stavrobot/common";
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
