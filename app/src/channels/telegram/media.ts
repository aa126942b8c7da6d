import { randomUUID } from "node:crypto";
import { mkdir, realpath, writeFile } from "node:fs/promises";
import { extname, join } from "node:path";
import { errorMessage, type Attachment, type Logger } from "@stavrobot/common";
import type { InboxEntry, InboxPayload, InboxStore } from "../../db/inbox.js";
import { TelegramError, type TelegramApi } from "./api.js";
import type { TelegramMediaRef } from "./inbound.js";

/** The Bot API lets bots download files up to 20 MB. */
export const TELEGRAM_DOWNLOAD_LIMIT_BYTES = 20 * 1024 * 1024;

const DESCRIPTIONS: Record<TelegramMediaRef["kind"], string> = {
  voice: "voice message",
  audio: "audio file",
  photo: "photo",
  document: "file",
};

/**
 * Fetches the files of a Telegram message when its turn is about to run (the webhook only saved
 * their ids, to answer Telegram at once). They land in the uploads of the agent the message went
 * to (a contact's in their agent's, never the owner's), and the inbox entry is updated, so a retried or resumed turn does not fetch them again. A file
 * that cannot be fetched becomes a note in the text: the message itself still reaches the agent.
 */
export class TelegramMediaFetcher {
  constructor(
    private readonly api: TelegramApi,
    /** An agent's uploads (`undefined`: the main agent's). */
    private readonly uploadsOf: (agentId: number | undefined) => string,
    private readonly inbox: InboxStore,
    private readonly logger: Logger,
    private readonly retryDelayMs = 1_000,
  ) {}

  async resolve(entry: InboxEntry): Promise<InboxPayload> {
    const media = (entry.payload.media ?? []).filter((item) => item.channel === "telegram");
    if (media.length === 0) return entry.payload;
    const attachments: Attachment[] = [...entry.payload.attachments];
    const notes: string[] = [];
    for (const { ref: stored } of media) {
      const ref = stored as TelegramMediaRef;
      try {
        attachments.push(await this.fetch(ref, this.uploadsOf(entry.payload.agentId)));
      } catch (error) {
        this.logger.warn("could not fetch a Telegram file", {
          id: entry.id,
          fileId: ref.fileId,
          error: errorMessage(error),
        });
        notes.push(
          `[A ${DESCRIPTIONS[ref.kind]} (${ref.fileName}) was sent but could not be downloaded: ${errorMessage(error)}]`,
        );
      }
    }
    const text = [entry.payload.message, ...notes].filter((part) => part?.trim()).join("\n\n");
    // Everything else the entry carries (the agent it goes to, the sender's name) stays as it was.
    const { media: _fetched, ...kept } = entry.payload;
    const payload: InboxPayload = { ...kept, message: text || undefined, attachments };
    await this.inbox.updatePayload(entry.id, payload);
    entry.payload = payload;
    return payload;
  }

  private async fetch(ref: TelegramMediaRef, uploadsDir: string): Promise<Attachment> {
    if ((ref.size ?? 0) > TELEGRAM_DOWNLOAD_LIMIT_BYTES) {
      throw new TelegramError("it is larger than the 20 MB Telegram lets bots download", undefined);
    }
    let data: Buffer | undefined;
    for (let attempt = 1; !data; attempt++) {
      try {
        data = (await this.api.download(ref.fileId, TELEGRAM_DOWNLOAD_LIMIT_BYTES)).data;
      } catch (error) {
        const permanent =
          error instanceof TelegramError &&
          error.status !== undefined &&
          error.status < 500 &&
          error.status !== 429;
        if (permanent || attempt >= 3) throw error;
        await new Promise((resolve) => setTimeout(resolve, this.retryDelayMs * attempt));
      }
    }
    await mkdir(uploadsDir, { recursive: true, mode: 0o700 });
    const storedPath = join(
      await realpath(uploadsDir),
      `upload-${randomUUID()}${extname(ref.fileName).slice(0, 16)}`,
    );
    await writeFile(storedPath, data, { flag: "wx", mode: 0o600 });
    return { storedPath, originalFilename: ref.fileName, mimeType: ref.mimeType, size: data.length };
  }
}
