import type { IncomingMessage } from "node:http";
import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { extname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import busboy from "busboy";
import {
  CHAT_FILE_LIMIT_BYTES,
  HttpError,
  badRequest,
  requireContentType,
  toSafeFilename,
  type Handler,
} from "@stavrobot/common";
import type { MessageQueue } from "../queue/queue.js";

export interface UploadDeps {
  queue: MessageQueue;
  uploadsDir: string;
}

/**
 * `POST /api/upload` (the reference's upload.py and curl -F): multipart with a `file` part (at most
 * 10 MB) and an optional `filename` text field. The file is stored, then a turn with source
 * "upload" tells the assistant about it; the answer goes to the owner. A refused or broken upload
 * leaves nothing on disk.
 */
export function createUploadHandler(deps: UploadDeps): Handler {
  return async ({ req }) => {
    requireContentType(req, ["multipart/form-data"]);
    const stored = await receive(req, deps.uploadsDir);
    try {
      const submitted = await deps.queue.submit("upload", null, {
        attachments: [
          {
            storedPath: stored.path,
            originalFilename: stored.originalFilename,
            mimeType: stored.mimeType,
            size: stored.size,
          },
        ],
      });
      // The reply goes to the owner; nobody waits for it here.
      void submitted.reply;
    } catch (error) {
      await rm(stored.path, { force: true });
      throw error;
    }
    return { json: { message: "File uploaded successfully", filename: stored.name } };
  };
}

interface Stored {
  path: string;
  name: string;
  originalFilename: string;
  mimeType: string;
  size: number;
}

function receive(req: IncomingMessage, uploadsDir: string): Promise<Stored> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        limits: { fileSize: CHAT_FILE_LIMIT_BYTES, files: 1, fields: 5 },
      });
    } catch (error) {
      reject(badRequest(`Invalid multipart body: ${(error as Error).message}`));
      return;
    }
    let file: (Stored & { done: Promise<void> }) | undefined;
    let fieldName: string | undefined;
    let failed = false;
    const fail = (error: HttpError): void => {
      if (failed) return;
      failed = true;
      req.unpipe(parser);
      req.resume();
      void (file ? rm(file.path, { force: true }) : Promise.resolve()).then(() => reject(error));
    };
    parser.on("file", (name, stream, info) => {
      if (name !== "file" || file) {
        stream.resume();
        return;
      }
      const original = toSafeFilename(info.filename || "upload");
      const storedName = `upload-${randomUUID()}${extname(original).slice(0, 16)}`;
      const path = join(uploadsDir, storedName);
      let size = 0;
      stream.on("data", (chunk: Buffer) => (size += chunk.length));
      stream.on("limit", () => fail(new HttpError(413, "File too large (max 10 MB)")));
      const done = pipeline(stream, createWriteStream(path, { flags: "wx", mode: 0o600 })).catch(() =>
        fail(badRequest("The upload was interrupted.")),
      );
      file = { path, name: storedName, originalFilename: original, mimeType: info.mimeType, size: 0, done };
      void done.then(() => {
        if (file) file.size = size;
      });
    });
    parser.on("field", (name, value) => {
      if (name === "filename" && value.trim()) fieldName = toSafeFilename(value.trim());
    });
    parser.on("error", (error: Error) => fail(badRequest(`Invalid multipart body: ${error.message}`)));
    parser.on("close", () => {
      if (failed) return;
      if (!file) {
        fail(badRequest("Missing required 'file' field"));
        return;
      }
      const current = file;
      void current.done.then(() => {
        if (failed) return;
        resolve({ ...current, originalFilename: fieldName ?? current.originalFilename });
      });
    });
    req.pipe(parser);
  });
}
