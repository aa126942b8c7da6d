import { basename } from "node:path";
import type { Logger, WhatsAppSendRequest } from "@stavrobot/common";
import { SerialLock, errorMessage, HttpError, toSafeFilename } from "@stavrobot/common";
import type { WhatsAppConnection } from "./connection.js";
import { markdownToWhatsApp } from "./format.js";
import { e164ToJid } from "./jid.js";

export interface OutboundTuning {
  /** The least time between two sends, plus up to `jitterMs` at random: WhatsApp bans machine-like bursts. */
  minGapMs?: number;
  jitterMs?: number;
}

const MIME_BY_EXTENSION: Record<string, string> = {
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".webp": "image/webp",
  ".gif": "image/gif",
  ".mp4": "video/mp4",
  ".ogg": "audio/ogg",
  ".opus": "audio/ogg",
  ".mp3": "audio/mpeg",
  ".m4a": "audio/mp4",
  ".pdf": "application/pdf",
  ".txt": "text/plain",
};

/**
 * Sends messages on the open connection, one at a time and paced with jitter. While the
 * connection is not open it answers 503 at once (the app's deliveries keep the message and retry).
 */
export class Outbound {
  private readonly lock = new SerialLock();
  private lastSent = 0;

  constructor(
    private readonly connection: Pick<WhatsAppConnection, "openSocket">,
    private readonly logger: Logger,
    private readonly tuning: OutboundTuning = {},
  ) {}

  async send(request: WhatsAppSendRequest): Promise<{ ids: string[] }> {
    this.connection.openSocket();
    return this.lock.run(async () => {
      await this.pace();
      const socket = this.connection.openSocket();
      const jid = e164ToJid(request.recipient);
      const text = request.message?.trim() ? markdownToWhatsApp(request.message) : undefined;
      const contents: Record<string, unknown>[] = [];
      if (request.attachment !== undefined) {
        contents.push(attachmentContent(request, text));
      } else if (text) {
        contents.push({ text });
      }
      const ids: string[] = [];
      for (const content of contents) {
        try {
          const sent = await socket.sendMessage(jid, content);
          if (sent?.id) ids.push(sent.id);
        } catch (error) {
          this.logger.warn("WhatsApp did not take a message", { error: errorMessage(error) });
          throw new HttpError(503, `WhatsApp did not take the message: ${errorMessage(error)}`);
        } finally {
          this.lastSent = Date.now();
        }
      }
      this.logger.info("sent a WhatsApp message", { to: request.recipient, parts: contents.length });
      return { ids };
    });
  }

  private async pace(): Promise<void> {
    const gap = (this.tuning.minGapMs ?? 1_500) + Math.random() * (this.tuning.jitterMs ?? 1_500);
    const wait = this.lastSent + gap - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/** An attachment as WhatsApp's kind of message for it (image, video, audio, else a document), the text as its caption. */
function attachmentContent(
  request: WhatsAppSendRequest,
  caption: string | undefined,
): Record<string, unknown> {
  const data = Buffer.from(request.attachment ?? "", "base64");
  const fileName = toSafeFilename(basename(request.attachmentFilename ?? "attachment.bin"), "attachment.bin");
  const extension = /\.[^.]+$/.exec(fileName.toLowerCase())?.[0] ?? "";
  const mimetype = MIME_BY_EXTENSION[extension] ?? "application/octet-stream";
  const withCaption = caption ? { caption } : {};
  if (mimetype.startsWith("image/") && mimetype !== "image/gif")
    return { image: data, mimetype, ...withCaption };
  if (mimetype.startsWith("video/")) return { video: data, mimetype, ...withCaption };
  // Audio carries no caption: send it as a document with the text beside it.
  return { document: data, mimetype, fileName, ...withCaption };
}
