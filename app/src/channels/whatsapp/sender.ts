import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import {
  ServiceError,
  errorBodyText,
  errorMessage,
  whatsappSendResponseSchema,
  type ServiceClient,
  type WhatsAppSendRequest,
} from "@stavrobot/common";
import type { Delivery } from "../../delivery/store.js";
import type { ChannelSender, SendResult } from "../../delivery/worker.js";

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
    const { recipient, payload } = delivery;
    const body: WhatsAppSendRequest = { recipient };
    if (payload.text?.trim()) body.message = payload.text;
    if (payload.attachmentPath) {
      body.attachment = (await readFile(payload.attachmentPath)).toString("base64");
      body.attachmentFilename = payload.attachmentName ?? basename(payload.attachmentPath);
    }
    try {
      await this.bridge.request("POST", "/send", { body, schema: whatsappSendResponseSchema, retries: 0 });
      return { ok: true };
    } catch (error) {
      return this.classify(error);
    }
  }

  private classify(error: unknown): SendResult {
    if (!(error instanceof ServiceError) || error.status === undefined) {
      return {
        ok: false,
        retry: true,
        channelDown: true,
        error: `the WhatsApp bridge does not answer (${errorMessage(error)}); npm start (or compose) restarts it, and its log says why it stopped`,
      };
    }
    const detail = errorBodyText(error.body) ?? error.message;
    if (error.status === 400 || error.status === 413) return { ok: false, retry: false, error: detail };
    // 503: not open (unlinked, logged out, failing…): the bridge says why; the message waits.
    if (error.status === 503) {
      return { ok: false, retry: true, channelDown: true, error: `${detail} (${this.pageUrl})` };
    }
    return { ok: false, retry: true, error: `WhatsApp did not take the message: ${detail}` };
  }
}
