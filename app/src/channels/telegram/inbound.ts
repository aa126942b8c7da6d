import { z } from "zod";
import { telegramEntitiesToMarkdown } from "./entities.js";

/** A file someone sent on Telegram, fetched with getFile when its turn runs. */
export interface TelegramMediaRef {
  kind: "voice" | "audio" | "photo" | "document";
  fileId: string;
  /** The name the assistant sees (the reference's: `voice-<file_id>.ogg`, `photo-<file_id>.jpg`, or the document's own). */
  fileName: string;
  mimeType: string;
  /** As Telegram reported it, when it did. */
  size?: number | undefined;
}

export interface TelegramInbound {
  updateId: number;
  chatId: string;
  /** Markdown, from the text or caption and their entities. */
  text: string | undefined;
  media: TelegramMediaRef[];
}

const entity = z.looseObject({
  type: z.string(),
  offset: z.number().int().nonnegative(),
  length: z.number().int().nonnegative(),
  url: z.string().optional(),
  language: z.string().optional(),
});
const file = z.looseObject({
  file_id: z.string().min(1).max(512),
  file_size: z.number().optional(),
  mime_type: z.string().max(255).optional(),
  file_name: z.string().max(1024).optional(),
});

/** The part of a Telegram Update the assistant reads; everything else is ignored, not refused. */
export const telegramUpdateSchema = z.looseObject({
  update_id: z.number().int(),
  message: z
    .looseObject({
      chat: z.looseObject({ id: z.number().int() }),
      text: z.string().optional(),
      entities: z.array(entity).optional(),
      caption: z.string().optional(),
      caption_entities: z.array(entity).optional(),
      voice: file.optional(),
      audio: file.optional(),
      photo: z.array(file).optional(),
      document: file.optional(),
    })
    .optional(),
});
export type TelegramUpdate = z.infer<typeof telegramUpdateSchema>;

/**
 * An update → what reaches the assistant: the chat it came from, its text as Markdown, and the
 * files to fetch. Undefined for updates that carry nothing the assistant reads (edits, stickers,
 * service messages, updates other than `message`).
 */
export function parseTelegramUpdate(update: TelegramUpdate): TelegramInbound | undefined {
  const message = update.message;
  if (!message) return undefined;
  const raw = message.text ?? message.caption;
  const entities = message.text !== undefined ? message.entities : message.caption_entities;
  const text = raw?.trim() ? telegramEntitiesToMarkdown(raw, entities) : undefined;
  const media: TelegramMediaRef[] = [];
  for (const [kind, audio] of [
    ["voice", message.voice],
    ["audio", message.audio],
  ] as const) {
    if (audio) {
      media.push({
        kind,
        fileId: audio.file_id,
        fileName: `voice-${safeId(audio.file_id)}.ogg`,
        mimeType: audio.mime_type ?? "audio/ogg",
        size: audio.file_size,
      });
    }
  }
  const photo = largest(message.photo ?? []);
  if (photo) {
    media.push({
      kind: "photo",
      fileId: photo.file_id,
      fileName: `photo-${safeId(photo.file_id)}.jpg`,
      mimeType: "image/jpeg",
      size: photo.file_size,
    });
  }
  if (message.document) {
    const doc = message.document;
    media.push({
      kind: "document",
      fileId: doc.file_id,
      fileName: doc.file_name?.trim() || `document-${safeId(doc.file_id)}`,
      mimeType: doc.mime_type ?? "application/octet-stream",
      size: doc.file_size,
    });
  }
  if (!text && media.length === 0) return undefined;
  return { updateId: update.update_id, chatId: String(message.chat.id), text, media };
}

/** Telegram lists photo sizes smallest first; pick by size when given, else the last. */
function largest<T extends { file_size?: number | undefined }>(sizes: T[]): T | undefined {
  if (sizes.every((size) => size.file_size !== undefined)) {
    return sizes.reduce<T | undefined>(
      (best, size) => (!best || (size.file_size ?? 0) >= (best.file_size ?? 0) ? size : best),
      undefined,
    );
  }
  return sizes[sizes.length - 1];
}

/** File ids are URL-safe base64 already; anything else is dropped from names built from them. */
function safeId(fileId: string): string {
  return fileId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 100) || "file";
}
