import { readFile, stat } from "node:fs/promises";
import { extname, join } from "node:path";
import type { InlineFile } from "@stavrobot/common";
import {
  CHAT_BODY_LIMIT_BYTES,
  CHAT_FILE_LIMIT_BYTES,
  CHAT_MAX_FILES,
  safeFilename,
  toSafeFilename,
} from "@stavrobot/common";

/** An attachment as signal-cli reports it in a `receive` event (json/JsonAttachment.java). */
export interface SignalAttachment {
  id?: string | null;
  contentType?: string | null;
  filename?: string | null;
}

export interface CollectedFiles {
  files: InlineFile[];
  /** Absolute paths of the attachments now carried in `files` (signal-cli's copies). */
  paths: string[];
  /** One line per attachment that could not be forwarded, for the message text. */
  notes: string[];
}

/**
 * Decoded bytes of all files on one message: their base64 (4/3 larger) must fit the app's `/chat`
 * body with room for the text.
 */
const MESSAGE_FILES_BUDGET_BYTES = Math.floor(((CHAT_BODY_LIMIT_BYTES - 1024 * 1024) * 3) / 4);

const EXTENSIONS: Record<string, string> = {
  "image/jpeg": ".jpg",
  "image/png": ".png",
  "image/gif": ".gif",
  "image/webp": ".webp",
  "image/heic": ".heic",
  "audio/aac": ".aac",
  "audio/mpeg": ".mp3",
  "audio/ogg": ".ogg",
  "audio/mp4": ".m4a",
  "video/mp4": ".mp4",
  "application/pdf": ".pdf",
  "text/plain": ".txt",
};

/**
 * Reads a message's attachments from signal-cli's attachments directory (each stored under its
 * `id`) as inline files for the app. Files over the app's 10 MB limit, beyond its file count or
 * its body size, missing or unreadable are left out with a note saying so.
 */
export async function collectAttachments(
  attachments: SignalAttachment[],
  directory: string,
): Promise<CollectedFiles> {
  const collected: CollectedFiles = { files: [], paths: [], notes: [] };
  let total = 0;
  for (const attachment of attachments) {
    const mimeType = mimeTypeOf(attachment.contentType);
    const name = attachmentName(attachment, mimeType);
    const id = attachment.id ? safeFilename(attachment.id) : undefined;
    const skip = (reason: string): void => {
      collected.notes.push(`(Attachment "${name}" was not forwarded: ${reason}.)`);
    };
    if (!id) {
      skip("signal-cli did not store it");
      continue;
    }
    const path = join(directory, id);
    const size = await stat(path).then(
      (info) => (info.isFile() ? info.size : undefined),
      () => undefined,
    );
    if (size === undefined) skip("signal-cli did not store it");
    else if (size > CHAT_FILE_LIMIT_BYTES) skip(`larger than ${megabytes(CHAT_FILE_LIMIT_BYTES)}`);
    else if (collected.files.length >= CHAT_MAX_FILES)
      skip(`a message carries at most ${CHAT_MAX_FILES} files`);
    else if (total + size > MESSAGE_FILES_BUDGET_BYTES)
      skip("the message's attachments together are too large");
    else {
      const data = await readFile(path).catch(() => undefined);
      if (!data) {
        skip("it could not be read");
        continue;
      }
      total += data.length;
      collected.files.push({ data: data.toString("base64"), filename: name, mimeType });
      collected.paths.push(path);
    }
  }
  return collected;
}

/**
 * The name the app sees: the sender's file name; `voice-note.<ext>` for audio without one (what the
 * Signal apps send for a voice message); otherwise signal-cli's id, which already ends in an
 * extension when signal-cli knew one.
 */
export function attachmentName(attachment: SignalAttachment, mimeType: string): string {
  const id = attachment.id ? toSafeFilename(attachment.id, "attachment") : "attachment";
  if (attachment.filename) return toSafeFilename(attachment.filename, id);
  const idExtension = extname(id);
  const extension = idExtension || EXTENSIONS[mimeType] || "";
  if (mimeType.startsWith("audio/")) {
    const fallback = mimeType.slice("audio/".length).replace(/[^a-z0-9]/gi, "");
    return `voice-note${extension || (fallback ? `.${fallback}` : "")}`;
  }
  return idExtension ? id : `${id}${extension}`;
}

function mimeTypeOf(contentType: string | null | undefined): string {
  const type = contentType?.trim().toLowerCase() ?? "";
  return /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(type) && type.length <= 200
    ? type
    : "application/octet-stream";
}

function megabytes(bytes: number): string {
  return `${Math.round(bytes / (1024 * 1024))} MB`;
}
