import { copyFile, mkdir, rm } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { basename, extname, join } from "node:path";
import type { Channel } from "../audience.js";
import { markdownToTelegramHtml, splitTelegramHtml } from "../channels/telegram/format.js";
import { TELEGRAM_CAPTION_LIMIT } from "../channels/telegram/sender.js";
import type { DeliveryPayload } from "./store.js";

/** What the assistant wants to send: Markdown text, a file (already copied into the outbox), or both. */
export interface Outgoing {
  markdown?: string | undefined;
  attachment?: { path: string; name: string } | undefined;
}

/**
 * One message → the deliveries that carry it, in order. Telegram gets HTML split into messages
 * under 4096 characters (the first one a caption of the file when it fits in 1024); Signal gets
 * the Markdown whole (the bridge converts it; signal-cli sends long text as an attachment).
 */
export function composeDeliveries(channel: Channel, outgoing: Outgoing): DeliveryPayload[] {
  const file = outgoing.attachment
    ? { attachmentPath: outgoing.attachment.path, attachmentName: outgoing.attachment.name }
    : {};
  const markdown = outgoing.markdown?.trim() ? outgoing.markdown : undefined;
  if (channel === "signal") {
    return [{ ...file, ...(markdown ? { text: markdown, format: "markdown" as const } : {}) }];
  }
  const chunks = markdown ? splitTelegramHtml(markdownToTelegramHtml(markdown)) : [];
  const texts = chunks.map((text) => ({ text, format: "html" as const }));
  if (!outgoing.attachment) return texts;
  const [first, ...rest] = texts;
  if (first && first.text.length <= TELEGRAM_CAPTION_LIMIT) return [{ ...file, ...first }, ...rest];
  return [file, ...texts];
}

/**
 * The outbox keeps its own copy of every attachment, taken when the message is queued: the
 * recipient gets the file as it was then, even if it is changed, moved or cleaned up before a
 * delayed send. The copy is removed once its delivery is settled.
 */
export class OutboxFiles {
  constructor(private readonly dir: string) {}

  async take(path: string): Promise<{ path: string; name: string }> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const name = basename(path);
    const copy = join(this.dir, `${randomUUID()}${extname(name).slice(0, 16)}`);
    await copyFile(path, copy);
    return { path: copy, name };
  }

  async discard(path: string): Promise<void> {
    await rm(path, { force: true });
  }
}
