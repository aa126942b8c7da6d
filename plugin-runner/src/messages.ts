import { extname } from "node:path";
import { CHAT_BODY_LIMIT_BYTES, CHAT_FILE_LIMIT_BYTES, CHAT_MAX_FILES, fence } from "@stavrobot/common";
import type { ChatRequest, TransportedFile } from "@stavrobot/common";

export { fence };

/** What running a tool or init script produced, before it becomes an HTTP answer or a chat message. */
export type RunOutcome =
  | { success: true; output: unknown; files?: TransportedFile[]; warnings?: string[] }
  | { success: false; error: string };

/**
 * What the app's `POST /chat` accepts: a limited number of inline files, each at most
 * CHAT_FILE_LIMIT_BYTES once decoded, in a body of at most CHAT_BODY_LIMIT_BYTES. Files beyond
 * that are left out with a note.
 */
const MAX_CHAT_FILE_CHARS = Math.ceil(CHAT_FILE_LIMIT_BYTES / 3) * 4;
/**
 * Room in the body for the message beside the files: the tool's output (stdout is capped at 1 MB
 * by default, but pretty-printed JSON and JSON escaping can grow it) and the JSON around it all.
 */
const MESSAGE_ROOM_BYTES = 5 * 1024 * 1024;
const MAX_CHAT_FILES_CHARS = CHAT_BODY_LIMIT_BYTES - MESSAGE_ROOM_BYTES;

function outputText(output: unknown): string {
  return typeof output === "string" ? output : JSON.stringify(output, null, 2);
}

/** The chat message carrying an async tool's result back to the agent. */
export function toolResultMessage(plugin: string, tool: string, outcome: RunOutcome): ChatRequest {
  const head = `The run of tool "${tool}" (plugin "${plugin}")`;
  if (!outcome.success) {
    return { source: `plugin:${plugin}/${tool}`, message: `${head} failed:\n${fence(outcome.error)}` };
  }
  let message = `${head} returned:\n${fence(outputText(outcome.output))}`;
  const { files, note } = chatFiles(outcome.files);
  const warnings = [...(outcome.warnings ?? []), ...(note ? [note] : [])];
  if (warnings.length > 0) message += `\n${warnings.join("\n")}`;
  return { source: `plugin:${plugin}/${tool}`, message, ...(files.length > 0 ? { files } : {}) };
}

/** The chat message reporting how an async init script ended. */
export function initResultMessage(plugin: string, outcome: RunOutcome): ChatRequest {
  const source = `plugin:${plugin}/init`;
  if (!outcome.success) {
    return { source, message: `Init script for plugin "${plugin}" failed:\n${fence(outcome.error)}` };
  }
  const output = outputText(outcome.output).trim();
  const message =
    `Init script for plugin "${plugin}" completed.` + (output ? `\nInit output:\n${fence(output)}` : "");
  return { source, message };
}

function chatFiles(files: TransportedFile[] = []) {
  const kept: { filename: string; data: string; mimeType: string }[] = [];
  const left: string[] = [];
  let total = 0;
  for (const file of files) {
    const fits =
      kept.length < CHAT_MAX_FILES &&
      file.data.length <= MAX_CHAT_FILE_CHARS &&
      total + file.data.length <= MAX_CHAT_FILES_CHARS;
    if (!fits) {
      left.push(file.filename);
      continue;
    }
    total += file.data.length;
    kept.push({ filename: file.filename, data: file.data, mimeType: guessMimeType(file.filename) });
  }
  const note =
    left.length > 0 ? `(Output files too large to deliver were left out: ${left.join(", ")}.)` : undefined;
  return { files: kept, note };
}

const MIME_TYPES: Record<string, string> = {
  ".txt": "text/plain",
  ".md": "text/markdown",
  ".csv": "text/csv",
  ".json": "application/json",
  ".html": "text/html",
  ".xml": "application/xml",
  ".pdf": "application/pdf",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".svg": "image/svg+xml",
  ".mp3": "audio/mpeg",
  ".ogg": "audio/ogg",
  ".oga": "audio/ogg",
  ".wav": "audio/wav",
  ".m4a": "audio/mp4",
  ".mp4": "video/mp4",
  ".zip": "application/zip",
};

export function guessMimeType(filename: string): string {
  return MIME_TYPES[extname(filename).toLowerCase()] ?? "application/octet-stream";
}
