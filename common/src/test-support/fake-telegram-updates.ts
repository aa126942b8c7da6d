/**
 * The Message and Update objects the fake Bot API hands out: the media fields of the messages it
 * sends, and the incoming updates tests build to deliver to a webhook.
 */

export interface FakeMessage {
  message_id: number;
  date: number;
  chat: { id: number; type: string; first_name?: string };
  [field: string]: unknown;
}

export interface FakeUpdate {
  update_id: number;
  message: FakeMessage;
}

/** A file the fake knows: uploaded with a send, or added by a test. */
export interface StoredFile {
  fileId: string;
  uniqueId: string;
  filePath: string;
  data: Buffer;
  fileName?: string;
  mimeType?: string;
}

export type MediaKind = "photo" | "voice" | "audio" | "document";

export const now = (): number => Math.floor(Date.now() / 1000);

/** The media field of a sent Message, e.g. `photo` (a list of sizes) or `document`. */
export function mediaField(kind: MediaKind, file: StoredFile): unknown {
  const common = { file_id: file.fileId, file_unique_id: file.uniqueId, file_size: file.data.length };
  if (kind === "photo") return [{ ...common, width: 800, height: 600 }];
  if (kind === "document") return { ...common, file_name: file.fileName, mime_type: file.mimeType };
  const mime = file.mimeType ?? (kind === "voice" ? "audio/ogg" : "audio/mpeg");
  if (kind === "voice") return { ...common, duration: 1, mime_type: mime };
  return { ...common, duration: 1, mime_type: mime, file_name: file.fileName };
}

/** Incoming updates, as Telegram would POST them to the webhook for a private chat with a user. */
export interface UpdateBuilders {
  textUpdate(chatId: number, text: string, entities?: object[]): FakeUpdate;
  /** Photo sizes in increasing size, so the last file id is the largest, as Telegram sends them. */
  photoUpdate(chatId: number, fileIds: string[], caption?: string): FakeUpdate;
  voiceUpdate(chatId: number, fileId: string, mimeType?: string): FakeUpdate;
  documentUpdate(chatId: number, fileId: string, fileName: string, mimeType: string): FakeUpdate;
}

/**
 * Builds updates whose file ids, when known to `files`, carry those files' real sizes. Message ids
 * come from `nextMessageId`, shared with the messages the fake sends.
 */
export function createUpdateBuilders(
  files: ReadonlyMap<string, StoredFile>,
  nextMessageId: () => number,
): UpdateBuilders {
  let updateIds = 100_000;

  function incoming(chatId: number, content: Record<string, unknown>): FakeUpdate {
    const from = { id: chatId, is_bot: false, first_name: "Tester", language_code: "en" };
    const chat = { id: chatId, first_name: "Tester", type: "private" };
    return {
      update_id: ++updateIds,
      message: { message_id: nextMessageId(), from, chat, date: now(), ...content },
    };
  }

  const fileSize = (fileId: string, fallback: number): number => files.get(fileId)?.data.length ?? fallback;
  const uniqueId = (fileId: string): string => files.get(fileId)?.uniqueId ?? `AQAD${fileId.slice(-12)}`;

  return {
    textUpdate: (chatId, text, entities) => incoming(chatId, { text, ...(entities ? { entities } : {}) }),
    photoUpdate: (chatId, fileIds, caption) =>
      incoming(chatId, {
        photo: fileIds.map((fileId, i) => ({
          file_id: fileId,
          file_unique_id: uniqueId(fileId),
          file_size: fileSize(fileId, 1_000 * (i + 1)),
          width: 320 * (i + 1),
          height: 240 * (i + 1),
        })),
        ...(caption === undefined ? {} : { caption }),
      }),
    voiceUpdate: (chatId, fileId, mimeType = "audio/ogg") =>
      incoming(chatId, {
        voice: {
          file_id: fileId,
          file_unique_id: uniqueId(fileId),
          duration: 1,
          mime_type: mimeType,
          file_size: fileSize(fileId, 1_000),
        },
      }),
    documentUpdate: (chatId, fileId, fileName, mimeType) =>
      incoming(chatId, {
        document: {
          file_id: fileId,
          file_unique_id: uniqueId(fileId),
          file_name: fileName,
          mime_type: mimeType,
          file_size: fileSize(fileId, 1_000),
        },
      }),
  };
}
