import type { IncomingMessage } from "node:http";
import { isRecord } from "./fake-llm.js";
import type { MultipartFile } from "./multipart.js";
import { readMultipart } from "./multipart.js";

/**
 * How the fake Bot API reads what a client sends, with Telegram's rules: its error shape, its HTML
 * parse mode (strictly, so tests catch output that the real API would refuse), its parameters and
 * the request bodies they come in. All pure except the request readers at the end.
 */

/** A Bot API error, answered as {ok:false, error_code, description, parameters?} in one place. */
export class TelegramApiError extends Error {
  constructor(
    readonly status: number,
    readonly description: string,
    readonly parameters?: Record<string, unknown>,
  ) {
    super(description);
  }
}

export const badRequest = (reason: string): TelegramApiError =>
  new TelegramApiError(400, `Bad Request: ${reason}`);

// ---------------------------------------------------------------------------------------------
// Telegram's HTML parse mode, strictly: so tests catch output that the real API would refuse.
// ---------------------------------------------------------------------------------------------

const SUPPORTED_TAGS = new Set(
  "b strong i em u ins s strike del span tg-spoiler a tg-emoji tg-time code pre blockquote".split(" "),
);
const ENTITY = /&(lt|gt|amp|quot|#\d{1,7}|#x[\da-fA-F]{1,6});/y;
const NAMED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"' };

function cantParse(html: string, index: number, reason: string): TelegramApiError {
  const offset = Buffer.byteLength(html.slice(0, index));
  return badRequest(`can't parse entities: ${reason} at byte offset ${offset}`);
}

function decodeEntity(name: string): string {
  if (!name.startsWith("#")) return NAMED[name] ?? "";
  const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
  return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : "\ufffd";
}

/** Checks a tag at `start` (html[start] is "<", html[end] is ">") and updates the open-tag stack. */
function parseTag(html: string, start: number, end: number, open: string[]): void {
  const tag = html.slice(start + 1, end);
  if (tag.startsWith("/")) {
    const name = tag.slice(1).trim().toLowerCase();
    const expected = open.pop();
    if (expected === undefined) throw cantParse(html, start, `Unexpected end tag "</${name}>"`);
    if (expected !== name) {
      throw cantParse(html, start, `Unmatched end tag, expected "</${expected}>", found "</${name}>"`);
    }
    return;
  }
  const match = /^([a-zA-Z][\w-]*)(\s[^]*)?$/.exec(tag);
  const name = match?.[1]?.toLowerCase() ?? tag;
  const attributes = match?.[2] ?? "";
  const spanOk = name !== "span" || /class\s*=\s*"tg-spoiler"/.test(attributes);
  if (!match || !SUPPORTED_TAGS.has(name) || !spanOk) {
    throw cantParse(html, start, `Unsupported start tag "${name}"`);
  }
  open.push(name);
}

/** Returns the text a client would show, or throws the 400 Telegram gives for malformed HTML. */
export function parseTelegramHtml(html: string): string {
  let text = "";
  const open: string[] = [];
  let i = 0;
  while (i < html.length) {
    const char = html[i] ?? "";
    if (char === "<") {
      const end = html.indexOf(">", i);
      if (end < 0) throw cantParse(html, i, "Unclosed start tag");
      parseTag(html, i, end, open);
      i = end + 1;
    } else if (char === "&") {
      ENTITY.lastIndex = i;
      const match = ENTITY.exec(html);
      if (!match) throw cantParse(html, i, 'Unescaped "&" (write &amp;)');
      text += decodeEntity(match[1] ?? "");
      i += match[0].length;
    } else {
      text += char;
      i++;
    }
  }
  const unclosed = open.at(-1);
  if (unclosed)
    throw badRequest(`can't parse entities: Can't find end tag corresponding to start tag "${unclosed}"`);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Parameters, as Telegram reads them
// ---------------------------------------------------------------------------------------------

export const stringParam = (value: unknown): string =>
  value === undefined || value === null ? "" : String(value);
export const booleanParam = (value: unknown): boolean => value === true || value === "true" || value === "1";

export function listParam(value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

export function chatIdOf(params: Record<string, unknown>): number {
  const raw = stringParam(params.chat_id).trim();
  if (!raw) throw badRequest("chat_id is empty");
  if (!/^-?\d+$/.test(raw)) throw badRequest("chat not found");
  return Number(raw);
}

/** The text Telegram would count: tags removed and entities decoded in HTML mode, else the text itself. */
export function visibleText(text: string, parseMode: unknown): string {
  return stringParam(parseMode).toLowerCase() === "html" ? parseTelegramHtml(text) : text;
}

// ---------------------------------------------------------------------------------------------
// Reading requests: query string, JSON, urlencoded or multipart (busboy)
// ---------------------------------------------------------------------------------------------

/** A file uploaded in a multipart request. */
export type TelegramUpload = MultipartFile;

interface Params {
  params: Record<string, unknown>;
  files: TelegramUpload[];
}

async function readForm(req: IncomingMessage, into: Params): Promise<void> {
  const { fields, files } = await readMultipart(req);
  Object.assign(into.params, fields);
  into.files.push(...files);
}

async function readJsonBody(req: IncomingMessage, into: Params): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (!text) return;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw badRequest("can't parse JSON");
  }
  if (!isRecord(body)) throw badRequest("JSON body must be an object");
  Object.assign(into.params, body);
}

/** Telegram takes parameters from the query string and from a JSON or form body alike. */
export async function readParams(req: IncomingMessage, url: URL): Promise<Params> {
  const read: Params = { params: Object.fromEntries(url.searchParams), files: [] };
  const type = (req.headers["content-type"] ?? "").toLowerCase();
  if (type.startsWith("application/json")) await readJsonBody(req, read);
  else if (type.startsWith("multipart/form-data") || type.startsWith("application/x-www-form-urlencoded")) {
    await readForm(req, read);
  } else req.resume();
  return read;
}
