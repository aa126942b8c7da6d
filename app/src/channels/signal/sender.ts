import {
  ServiceError,
  errorBodyText,
  signalRateLimitedSchema,
  signalSendResponseSchema,
  type ServiceClient,
  type SignalSendRequest,
} from "@stavrobot/common";
import type { Delivery } from "../../delivery/store.js";
import type { ChannelSender, SendResult } from "../../delivery/worker.js";
import { bridgeSendBody, bridgeUnreachable } from "../bridge-send.js";

/**
 * Sends one delivery through the signal-bridge (`POST /send`): the text as Markdown (the bridge
 * turns it into Signal text styles), the attachment as base64. Signal has no length limit worth
 * splitting for: signal-cli turns a long text into an attachment itself.
 */
export class SignalSender implements ChannelSender {
  constructor(
    private readonly bridge: ServiceClient,
    /** Where the owner solves a rate-limit captcha (`<publicHostname>/signal/captcha`). */
    private readonly captchaUrl: string,
  ) {}

  async send(delivery: Delivery): Promise<SendResult> {
    const body: SignalSendRequest = await bridgeSendBody(delivery);
    try {
      // One attempt per call (a POST is sent once): the delivery worker owns the retries and their backoff.
      await this.bridge.request("POST", "/send", { body, schema: signalSendResponseSchema });
      return { ok: true };
    } catch (error) {
      return this.classify(error);
    }
  }

  private classify(error: unknown): SendResult {
    if (!(error instanceof ServiceError) || error.status === undefined)
      return bridgeUnreachable("Signal", error);
    const limited = signalRateLimitedSchema.safeParse(error.body);
    if (error.status === 429 && limited.success) {
      return {
        ok: false,
        retry: true,
        retryAfterMs: Math.max(limited.data.retryAfterSeconds, 1) * 1000,
        error:
          `Signal rate-limited this message; it will be retried in ${limited.data.retryAfterSeconds} s. ` +
          `To lift the limit sooner, the owner can solve the captcha at ${this.captchaUrl}.`,
      };
    }
    const detail = errorBodyText(error.body) ?? error.message;
    // 400: the request itself is wrong (a bad number, a file too large) and will never work.
    if (error.status === 400 || error.status === 413) return { ok: false, retry: false, error: detail };
    // 503: signal-cli does not run; the bridge says why and what to do ("signal-cli is not installed…").
    if (error.status === 503) return { ok: false, retry: true, channelDown: true, error: detail };
    return { ok: false, retry: true, error: `Signal did not take the message: ${detail}` };
  }
}
