import { randomUUID } from "node:crypto";
import { mkdir, realpath, rm, writeFile } from "node:fs/promises";
import { extname, join, sep } from "node:path";
import {
  HttpError,
  badRequest,
  chatRequestSchema,
  readValidJson,
  type Attachment,
  type ChatRequest,
  type Handler,
} from "@stavrobot/common";
import type { InboxStore } from "../db/inbox.js";
import type { MessageQueue, Submitted } from "../queue.js";

export const CHAT_BODY_LIMIT = 25 * 1024 * 1024;
export const FILE_LIMIT = 10 * 1024 * 1024;

export interface ChatDeps {
  queue: MessageQueue;
  inbox: InboxStore;
  uploadsDir: string;
  /** A message explaining what configuration is missing, or undefined when the app is ready. */
  notReady: () => string | undefined;
}

/**
 * `POST /chat`: validate everything, store inline files, save the message, wait for the reply.
 * Nothing is written until the whole request has been checked.
 */
export function createChatHandler(deps: ChatDeps): Handler {
  return async ({ req, res }) => {
    const body = await readValidJson(req, CHAT_BODY_LIMIT, chatRequestSchema);
    if (isStop(body)) return { json: { response: deps.queue.stop() } };
    const missing = deps.notReady();
    if (missing) throw new HttpError(503, missing);

    const attachments = await checkAttachments(body.attachments ?? [], deps.uploadsDir);
    const inline = decodeInlineFiles(body);
    const written = await storeFiles(inline, deps.uploadsDir);
    const source = body.source ?? null;
    let submitted: Submitted;
    try {
      submitted = await deps.queue.submit(
        source,
        body.sender ?? null,
        { message: body.message, attachments: [...attachments, ...written] },
        body.idempotencyKey,
      );
    } catch (error) {
      await removeFiles(written);
      throw error;
    }
    // A repeated delivery: the first one already brought these files.
    if (submitted.duplicate) await removeFiles(written);
    const reply = await submitted.reply;
    const missed = await deps.inbox.undelivered(source, submitted.id);
    // A steering acknowledgement is not the message's reply: that one is settled after the turn.
    const seen = [...(submitted.steered ? [] : [submitted.id]), ...missed.map((m) => m.id)];
    res.once("finish", () => void deps.inbox.markDelivered(seen).catch(() => {}));
    return { json: { response: withMissedReplies(reply, missed) } };
  };
}

async function removeFiles(files: Attachment[]): Promise<void> {
  await Promise.all(files.map((file) => rm(file.storedPath, { force: true })));
}

function isStop(body: ChatRequest): boolean {
  return (
    body.message?.trim().toLowerCase() === "/stop" &&
    !body.audio &&
    !body.files?.length &&
    !body.attachments?.length
  );
}

/** Attachments must already live in the uploads directory (no reading arbitrary files). */
async function checkAttachments(attachments: Attachment[], uploadsDir: string): Promise<Attachment[]> {
  const root = await realpath(uploadsDir);
  const checked: Attachment[] = [];
  for (const attachment of attachments) {
    let resolved: string;
    try {
      resolved = await realpath(attachment.storedPath);
    } catch {
      throw badRequest(`Attachment not found: ${attachment.originalFilename}`);
    }
    if (!resolved.startsWith(root + sep)) {
      throw badRequest(`Attachment ${attachment.originalFilename} is not in the uploads directory`);
    }
    checked.push({ ...attachment, storedPath: resolved });
  }
  return checked;
}

interface DecodedFile {
  data: Buffer;
  filename: string;
  mimeType: string;
}

function decodeInlineFiles(body: ChatRequest): DecodedFile[] {
  const files: DecodedFile[] = (body.files ?? []).map((file, index) => ({
    data: decodeBase64(file.data, `files.${index}.data`),
    filename: safeName(file.filename),
    mimeType: file.mimeType,
  }));
  if (body.audio !== undefined) {
    const mimeType = body.audioContentType ?? "audio/ogg";
    files.push({
      data: decodeBase64(body.audio, "audio"),
      filename: `voice-note${extensionFor(mimeType)}`,
      mimeType,
    });
  }
  for (const file of files) {
    if (file.data.length > FILE_LIMIT) throw new HttpError(413, `File ${file.filename} is larger than 10 MB`);
  }
  return files;
}

function decodeBase64(data: string, field: string): Buffer {
  const compact = data.replace(/\s+/g, "");
  if (compact.length === 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 === 1) {
    throw badRequest(`Invalid request: ${field}: not valid base64`);
  }
  return Buffer.from(compact, "base64");
}

async function storeFiles(files: DecodedFile[], uploadsDir: string): Promise<Attachment[]> {
  await mkdir(uploadsDir, { recursive: true });
  const root = await realpath(uploadsDir);
  const stored: Attachment[] = [];
  try {
    for (const file of files) {
      const storedPath = join(root, `upload-${randomUUID()}${extname(file.filename).slice(0, 16)}`);
      await writeFile(storedPath, file.data, { flag: "wx", mode: 0o600 });
      stored.push({
        storedPath,
        originalFilename: file.filename,
        mimeType: file.mimeType,
        size: file.data.length,
      });
    }
  } catch (error) {
    await Promise.all(stored.map((file) => rm(file.storedPath, { force: true })));
    throw error;
  }
  return stored;
}

function safeName(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? "file";
  const cleaned = base.replace(/[^\w.\- ]+/g, "_").replace(/^\.+/, "");
  return cleaned.length > 0 ? cleaned.slice(0, 200) : "file";
}

function extensionFor(mimeType: string): string {
  const subtype =
    mimeType
      .split("/")[1]
      ?.split(";")[0]
      ?.replace(/[^a-z0-9]/gi, "") ?? "";
  return subtype ? `.${subtype.slice(0, 10)}` : ".bin";
}

function withMissedReplies(reply: string, missed: { message: string; response: string }[]): string {
  if (missed.length === 0) return reply;
  const earlier = missed
    .map((m) => `> ${m.message.split("\n")[0]?.slice(0, 200) || "(attachment)"}\n${m.response}`)
    .join("\n\n");
  return `Replies to earlier messages that did not reach you:\n\n${earlier}\n\n---\n\n${reply}`;
}
