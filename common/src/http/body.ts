import type { IncomingMessage } from "node:http";
import type { z } from "zod";
import { HttpError, badRequest } from "../errors.js";
import { formatZodError } from "../zod-format.js";

export const tooLarge = (): HttpError => new HttpError(413, "Request body too large");

/**
 * Reads the whole body, refusing (413) as soon as it passes `limitBytes`: first from the declared
 * Content-Length, then while streaming, so an oversized upload is never buffered.
 */
export async function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limitBytes) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** True when the request announces a body (a length above zero, or a chunked one). */
export function hasBody(req: IncomingMessage): boolean {
  const length = Number(req.headers["content-length"] ?? 0);
  return length > 0 || req.headers["transfer-encoding"] !== undefined;
}

/** The media type of the request without parameters, lower-cased: `application/json`. */
export function mediaType(req: IncomingMessage): string {
  return (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/**
 * Refuses (415) a body that is not declared as one of `accepted`. A browser lets any web page send
 * `text/plain` or a form without asking the user, with the owner's cached credentials attached;
 * JSON cannot be sent that way, so requiring it closes form-based request forgery.
 */
export function requireContentType(req: IncomingMessage, accepted: readonly string[]): void {
  if (!hasBody(req)) return;
  const type = mediaType(req);
  if (accepted.includes(type)) return;
  throw new HttpError(
    415,
    `Unsupported Content-Type${type ? ` "${type}"` : ""}: send ${accepted.join(" or ")}`,
  );
}

/** Reads and parses a JSON object body; 415 unless it is declared JSON, 400 when it is not one. */
export async function readJsonObject(
  req: IncomingMessage,
  limitBytes: number,
): Promise<Record<string, unknown>> {
  requireContentType(req, ["application/json"]);
  const raw = await readBody(req, limitBytes);
  if (raw.length === 0) throw badRequest("Request body is empty; expected a JSON object");
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString("utf8"));
  } catch (error) {
    throw badRequest(`Invalid JSON: ${(error as Error).message}`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw badRequest("Request body must be a JSON object");
  }
  return parsed as Record<string, unknown>;
}

/** Reads a JSON body and validates it with a zod schema (400 names the offending field). */
export async function readValidJson<T extends z.ZodType>(
  req: IncomingMessage,
  limitBytes: number,
  schema: T,
): Promise<z.infer<T>> {
  const body = await readJsonObject(req, limitBytes);
  const result = schema.safeParse(body);
  if (!result.success) throw badRequest(`Invalid request: ${formatZodError(result.error)}`);
  return result.data;
}
