import { z } from "zod";
import { isStorableText } from "../text.js";

/**
 * Facts of the wire shared by every service: size limits, the idempotency-key format, base64 and
 * file-name rules. Each lives here once; services import it instead of keeping a copy.
 */

const MB = 1024 * 1024;

/** `POST /chat` body (JSON, including base64 files). */
export const CHAT_BODY_LIMIT_BYTES = 25 * MB;
/** One decoded file carried on `POST /chat` (`files`, `audio`) or uploaded with `POST /api/upload`. */
export const CHAT_FILE_LIMIT_BYTES = 10 * MB;
/** At most this many inline files or attachments on one chat message. */
export const CHAT_MAX_FILES = 20;
/** Files handed to or returned by one tool or script run, decoded, in total. */
export const RUN_FILES_LIMIT_BYTES = 25 * MB;

export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9._:-]{8,200}$/;

export const idempotencyKeySchema = z
  .string()
  .regex(IDEMPOTENCY_KEY_PATTERN, "8 to 200 letters, digits or . _ : -");

/**
 * A string the database can store: no U+0000 and no unpaired UTF-16 surrogate. Requests carrying
 * such text are refused at the contract (400 naming the field) instead of failing deep inside.
 */
export const storableString = (): z.ZodString =>
  z.string().refine(isStorableText, "must not contain NUL characters or unpaired surrogates");

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes strict base64 (whitespace allowed between groups); undefined when it is not base64. */
export function decodeBase64(data: string): Buffer | undefined {
  const compact = data.replace(/\s+/g, "");
  if (!BASE64.test(compact) || compact.length % 4 === 1) return undefined;
  return Buffer.from(compact, "base64");
}

/**
 * A plain file name: no directory part, not `.` or `..`, no control characters, at most 255 bytes.
 * Returns undefined for anything else (callers refuse it or pick a name of their own).
 */
export function safeFilename(name: string): string | undefined {
  if (name.length === 0 || name === "." || name === ".." || Buffer.byteLength(name) > 255) return undefined;
  // eslint-disable-next-line no-control-regex
  if (/[/\\\x00-\x1f\x7f]/.test(name) || !name.isWellFormed()) return undefined;
  return name;
}

/** `safeFilename`, or the base name with unsafe characters replaced, or `fallback`. */
export function toSafeFilename(name: string, fallback = "file"): string {
  const exact = safeFilename(name);
  if (exact) return exact;
  const base = name.toWellFormed().split(/[\\/]/).pop() ?? "";
  // eslint-disable-next-line no-control-regex
  const cleaned = base.replace(/[\x00-\x1f\x7f]+/g, "_").replace(/^\.+$/, "");
  const trimmed = Buffer.from(cleaned)
    .subarray(0, 200)
    .toString("utf8")
    .replace(/\uFFFD+$/, "");
  return safeFilename(trimmed) ?? fallback;
}
