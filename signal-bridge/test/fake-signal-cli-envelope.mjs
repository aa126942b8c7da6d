/**
 * The `receive` envelope fake-signal-cli emits for POST /test/inbound, shaped like signal-cli's
 * JsonMessageEnvelope / JsonDataMessage / JsonAttachment, with attachment bytes stored where signal-cli
 * stores them: `<config>/attachments/<remote id><.ext>`, the JSON `id` being that file name.
 */
import { Buffer } from "node:buffer";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { extname, join } from "node:path";

/** A stable fake ACI per phone number, so a test can match recipientAddress.uuid across calls. */
export function address(number) {
  const hex = createHash("sha256").update(number).digest("hex");
  const uuid = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  return { uuid, number };
}

/** Builds the envelope signal-cli would emit, storing attachment bytes where signal-cli stores them. */
export function inboundEnvelope(body, configDir) {
  const timestamp = Number.isInteger(body.timestamp) ? body.timestamp : Date.now();
  const dataMessage = {
    timestamp,
    message: typeof body.message === "string" ? body.message : null,
    expiresInSeconds: 0,
    viewOnce: false,
  };
  const attachments = (Array.isArray(body.attachments) ? body.attachments : []).map((attachment) =>
    storeAttachment(attachment, body.voiceNote === true, configDir),
  );
  if (attachments.length > 0) dataMessage.attachments = attachments;
  if (Array.isArray(body.textStyles) && body.textStyles.length > 0) dataMessage.textStyles = body.textStyles;
  return {
    source: body.source,
    sourceNumber: body.source,
    sourceUuid: body.sourceUuid ?? address(body.source).uuid,
    sourceName: body.sourceName ?? "Test User",
    sourceDevice: 1,
    timestamp,
    serverReceivedTimestamp: timestamp,
    serverDeliveredTimestamp: timestamp,
    dataMessage,
  };
}

const extensionsByType = {
  "image/jpeg": "jpg",
  "image/png": "png",
  "image/gif": "gif",
  "image/webp": "webp",
  "audio/aac": "aac",
  "audio/mpeg": "mp3",
  "audio/ogg": "ogg",
  "audio/mp4": "m4a",
  "video/mp4": "mp4",
  "application/pdf": "pdf",
  "text/plain": "txt",
};

function storeAttachment(attachment, voiceNote, configDir) {
  const contentType = attachment.contentType ?? (voiceNote ? "audio/aac" : "application/octet-stream");
  const filename = voiceNote ? null : (attachment.filename ?? null);
  const fromName = filename && filename.includes(".") ? extname(filename).slice(1) : undefined;
  const extension = fromName ?? extensionsByType[contentType];
  const id = `${randomBytes(15).toString("base64url")}${extension ? `.${extension}` : ""}`;
  const bytes = Buffer.from(String(attachment.data ?? ""), "base64");
  const directory = join(configDir, "attachments");
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  writeFileSync(join(directory, id), bytes);
  return {
    contentType,
    filename,
    id,
    size: bytes.length,
    width: null,
    height: null,
    caption: null,
    uploadTimestamp: Date.now(),
  };
}
