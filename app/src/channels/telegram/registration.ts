import { errorMessage, type Logger } from "@stavrobot/common";
import type { TelegramApi } from "./api.js";

/**
 * Registers the webhook with Telegram (`setWebhook` with the URL and this start's secret) and keeps
 * trying, with growing pauses, until Telegram accepts it: a start while Telegram or the network is
 * briefly unreachable still ends up with a working bot. Returns a function that stops trying.
 */
export function registerWebhook(
  api: TelegramApi,
  options: { url: string; secret: string; logger: Logger; retryMs?: number; maxRetryMs?: number },
): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let delay = options.retryMs ?? 2_000;
  const attempt = async (): Promise<void> => {
    try {
      await api.call("setWebhook", {
        url: options.url,
        secret_token: options.secret,
        allowed_updates: ["message"],
      });
      options.logger.info("Telegram webhook registered", { url: options.url });
    } catch (error) {
      if (stopped) return;
      options.logger.error("could not register the Telegram webhook; will retry", {
        url: options.url,
        inMs: delay,
        error: errorMessage(error),
      });
      timer = setTimeout(() => void attempt(), delay);
      timer.unref();
      delay = Math.min(delay * 2, options.maxRetryMs ?? 5 * 60_000);
    }
  };
  void attempt();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
