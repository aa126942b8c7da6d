import { createHash } from "node:crypto";
import { z } from "zod";
import type { ChatRequest, InlineFile, Logger, Outbox } from "@stavrobot/common";
import { CHAT_FILE_LIMIT_BYTES, errorMessage, toSafeFilename } from "@stavrobot/common";
import type { WaSocket } from "./connection.js";
import { whatsAppToMarkdown } from "./format.js";
import { isLid, jidToE164 } from "./jid.js";

const media = z.object({
  caption: z.string().nullish(),
  mimetype: z.string().nullish(),
  fileName: z.string().nullish(),
  fileLength: z.unknown().optional(),
  ptt: z.boolean().nullish(),
});

/** The message fields the bridge reads (Baileys' `proto.IMessage`); everything else is ignored. */
const contentSchema = z.object({
  conversation: z.string().nullish(),
  extendedTextMessage: z.object({ text: z.string().nullish() }).nullish(),
  imageMessage: media.nullish(),
  videoMessage: media.nullish(),
  audioMessage: media.nullish(),
  documentMessage: media.nullish(),
});
type Content = z.infer<typeof contentSchema>;

const messageSchema = z.object({
  key: z.object({
    remoteJid: z.string().nullish(),
    remoteJidAlt: z.string().nullish(),
    fromMe: z.boolean().nullish(),
    id: z.string().nullish(),
  }),
  message: z.record(z.string(), z.unknown()).nullish(),
  /** Seconds since the epoch (a number, or protobuf's Long). */
  messageTimestamp: z.unknown().optional(),
});

export type InboundResult =
  { kind: "skipped"; reason: string } | { kind: "message"; id: string; message: ChatRequest };

/** Wrappers WhatsApp puts around a message (disappearing, view-once, a document with a caption). */
const WRAPPERS = ["ephemeralMessage", "viewOnceMessage", "viewOnceMessageV2", "documentWithCaptionMessage"];

function unwrap(message: Record<string, unknown>): Record<string, unknown> {
  for (const wrapper of WRAPPERS) {
    const inner = (message[wrapper] as { message?: unknown } | undefined)?.message;
    if (inner && typeof inner === "object") return unwrap(inner as Record<string, unknown>);
  }
  return message;
}

/**
 * Turns one received message into a chat message for the app, or says why there is none. Only
 * direct messages from someone else count (groups, broadcasts, channels and this account's own
 * messages are skipped). A sender WhatsApp names by `@lid` is resolved to their phone number when
 * WhatsApp told it; otherwise the message is skipped (the app knows people by number).
 */
export async function toChatMessage(
  raw: unknown,
  socket: Pick<WaSocket, "pnForLid" | "download">,
): Promise<InboundResult> {
  const parsed = messageSchema.safeParse(raw);
  if (!parsed.success || !parsed.data.message) return { kind: "skipped", reason: "not a message" };
  const { key } = parsed.data;
  if (key.fromMe) return { kind: "skipped", reason: "sent by this account" };
  const jid = key.remoteJid ?? "";
  if (!jid.endsWith("@s.whatsapp.net") && !isLid(jid))
    return { kind: "skipped", reason: "not a direct message" };
  const sender = await senderNumber(jid, key.remoteJidAlt ?? undefined, socket);
  if (!sender) return { kind: "skipped", reason: "the sender's number is not known" };
  const content = contentSchema.safeParse(unwrap(parsed.data.message));
  if (!content.success) return { kind: "skipped", reason: "an unexpected message shape" };

  const text = textOf(content.data);
  const { files, notes } = await mediaOf(content.data, raw, socket);
  const message = [text ? whatsAppToMarkdown(text) : "", ...notes]
    .filter((part) => part.trim() !== "")
    .join("\n\n");
  if (message === "" && files.length === 0) return { kind: "skipped", reason: "no content" };
  return {
    kind: "message",
    id: entryId(Number(parsed.data.messageTimestamp ?? 0), key.id ?? "", sender),
    message: {
      source: "whatsapp",
      sender,
      ...(message !== "" ? { message } : {}),
      ...(files.length > 0 ? { files } : {}),
    },
  };
}

async function senderNumber(
  jid: string,
  alternative: string | undefined,
  socket: Pick<WaSocket, "pnForLid">,
): Promise<string | undefined> {
  if (!isLid(jid)) return jidToE164(jid);
  if (alternative && jidToE164(alternative)) return jidToE164(alternative);
  const pn = await socket.pnForLid(jid).catch(() => null);
  return pn ? jidToE164(pn) : undefined;
}

function textOf(content: Content): string {
  return (
    content.conversation ??
    content.extendedTextMessage?.text ??
    content.imageMessage?.caption ??
    content.videoMessage?.caption ??
    content.documentMessage?.caption ??
    ""
  );
}

const EXTENSIONS: Record<string, string> = {
  "image/jpeg": ".jpg",
  "image/png": ".png",
  "image/webp": ".webp",
  "video/mp4": ".mp4",
  "audio/ogg": ".ogg",
  "audio/mpeg": ".mp3",
  "audio/mp4": ".m4a",
  "application/pdf": ".pdf",
};

/** The message's one media file (image, video, voice note or other audio, document), downloaded. */
async function mediaOf(
  content: Content,
  raw: unknown,
  socket: Pick<WaSocket, "download">,
): Promise<{ files: InlineFile[]; notes: string[] }> {
  const kinds = [
    ["imageMessage", "image"],
    ["videoMessage", "video"],
    ["audioMessage", "audio"],
    ["documentMessage", "document"],
  ] as const;
  for (const [field, kind] of kinds) {
    const item = content[field];
    if (!item) continue;
    const mimeType = (item.mimetype ?? "application/octet-stream").split(";")[0]!.trim().toLowerCase();
    const extension = EXTENSIONS[mimeType] ?? "";
    const name =
      kind === "audio"
        ? `${item.ptt ? "voice-note" : "audio"}${extension}`
        : item.fileName
          ? toSafeFilename(item.fileName, `${kind}${extension}`)
          : `${kind}${extension}`;
    const size = Number(item.fileLength ?? 0);
    if (size > CHAT_FILE_LIMIT_BYTES) {
      return {
        files: [],
        notes: [
          `(Attachment "${name}" was not forwarded: larger than ${CHAT_FILE_LIMIT_BYTES / (1024 * 1024)} MB.)`,
        ],
      };
    }
    try {
      const data = await socket.download(raw);
      if (data.length > CHAT_FILE_LIMIT_BYTES) {
        return {
          files: [],
          notes: [
            `(Attachment "${name}" was not forwarded: larger than ${CHAT_FILE_LIMIT_BYTES / (1024 * 1024)} MB.)`,
          ],
        };
      }
      return { files: [{ data: data.toString("base64"), filename: name, mimeType }], notes: [] };
    } catch (error) {
      return {
        files: [],
        notes: [
          `(Attachment "${name}" was not forwarded: it could not be downloaded: ${errorMessage(error)}.)`,
        ],
      };
    }
  }
  return { files: [], notes: [] };
}

/**
 * Names the outbox entry after the message (its time, WhatsApp id and sender): seen twice, it is
 * one entry with one idempotency key, and entries sort by time.
 */
function entryId(seconds: number, messageId: string, sender: string): string {
  const hash = createHash("sha256").update(`${sender}\n${messageId}`).digest("hex").slice(0, 24);
  const millis = Number.isFinite(seconds) && seconds > 0 ? Math.floor(seconds) * 1000 : 0;
  return `${String(millis).padStart(15, "0")}-whatsapp-${hash}`;
}

/** Queues each received message for durable delivery to the app. */
export function createInboundHandler(deps: {
  outbox: Pick<Outbox, "enqueue">;
  logger: Logger;
  onReceived: () => void;
}): (socket: WaSocket, messages: readonly unknown[]) => Promise<void> {
  return async (socket, messages) => {
    for (const raw of messages) {
      try {
        const result = await toChatMessage(raw, socket);
        if (result.kind === "skipped") {
          deps.logger.debug("ignored a WhatsApp message", { reason: result.reason });
          continue;
        }
        deps.onReceived();
        await deps.outbox.enqueue(result.message, { id: result.id });
        deps.logger.info("received a WhatsApp message", {
          from: result.message.sender,
          files: result.message.files?.length ?? 0,
        });
      } catch (error) {
        deps.logger.error("could not take a WhatsApp message", { error: errorMessage(error) });
      }
    }
  };
}
