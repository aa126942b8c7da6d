import {
  ServiceError,
  errorBodyText,
  whatsappSendResponseSchema,
  type ServiceClient,
  type WhatsAppSendRequest,
} from "@stavrobot/common";
import type { Delivery } from "../../delivery/store.js";
import type { ChannelSender, SendResult } from "../../delivery/worker.js";
import { bridgeSendBody, bridgeUnreachable } from "../bridge-send.js";

/**
 * Sends one delivery through the whatsapp-bridge (`POST /send`): the text as Markdown (the bridge
 * turns it into WhatsApp's formatting), the attachment as base64. While WhatsApp is not open the
 * bridge answers 503 and the delivery waits in the outbox, retried with the worker's backoff.
 */
export class WhatsAppSender implements ChannelSender {
  constructor(
    private readonly bridge: ServiceClient,
    /** Where the owner links the number (`<publicHostname>/settings/whatsapp`). */
    private readonly pageUrl: string,
  ) {}

  async send(delivery: Delivery): Promise<SendResult> {
    const body: WhatsAppSendRequest = await bridgeSendBody(delivery);
    try {
      await this.bridge.request("POST", "/send", { body, schema: whatsappSendResponseSchema, retries: 0 });
      return { ok: true };
    } catch (error) {
      return this.classify(error);
    }
  }

  private classify(error: unknown): SendResult {
    if (!(error instanceof ServiceError) || error.status === undefined)
      return bridgeUnreachable("WhatsApp", error);
    const detail = errorBodyText(error.body) ?? error.message;
    if (error.status === 400 || error.status === 413) return { ok: false, retry: false, error: detail };
    // 503: not open (unlinked, logged out, failing…): the bridge says why; the message waits.
    if (error.status === 503) {
      return { ok: false, retry: true, channelDown: true, error: `${detail} (${this.pageUrl})` };
    }
    return { ok: false, retry: true, error: `WhatsApp did not take the message: ${detail}` };
  }
}
