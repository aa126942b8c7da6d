import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { listen } from "../http/serve.js";
import { sendJson } from "./fake-llm.js";
import {
  badRequest,
  booleanParam,
  chatIdOf,
  listParam,
  readParams,
  stringParam,
  TelegramApiError,
  visibleText,
} from "./fake-telegram-html.js";
import type { TelegramUpload } from "./fake-telegram-html.js";
import { createUpdateBuilders, mediaField, now } from "./fake-telegram-updates.js";
import type { FakeMessage, MediaKind, StoredFile, UpdateBuilders } from "./fake-telegram-updates.js";

export { parseTelegramHtml } from "./fake-telegram-html.js";
export type { TelegramUpload } from "./fake-telegram-html.js";
export type { FakeMessage, FakeUpdate } from "./fake-telegram-updates.js";

/** One Bot API request as the fake received it. Form values stay strings, as on the wire. */
export interface TelegramCall {
  /** Canonical method name (Telegram method names are case-insensitive), e.g. "sendMessage". */
  method: string;
  params: Record<string, unknown>;
  files: TelegramUpload[];
}

/** A successful sendMessage/sendPhoto/sendVoice/sendAudio/sendDocument and the Message it returned. */
export interface TelegramSent extends TelegramCall {
  message: FakeMessage;
}

export interface WebhookRegistration {
  url: string;
  secret_token?: string;
  allowed_updates?: unknown;
  drop_pending_updates?: boolean;
}

export interface FailAnswer {
  status: number;
  description?: string;
  /** Seconds, sent as `parameters.retry_after`; a 429 without it carries 1. */
  retryAfter?: number;
}

export interface FakeTelegram extends UpdateBuilders {
  /** Base URL to use instead of https://api.telegram.org, e.g. "http://127.0.0.1:41234". */
  url: string;
  token: string;
  /**
   * Every API request with the right token, failed and unknown methods included, in order
   * (file downloads are not API calls).
   */
  calls: TelegramCall[];
  /** Successful message sends only, in order (sendChatAction is in `calls` only). */
  sent: TelegramSent[];
  /** The last setWebhook parameters, or undefined when no webhook is set. */
  readonly webhook: WebhookRegistration | undefined;
  /** Makes a file known to getFile and downloadable at `/file/bot<token>/<filePath>`. */
  addFile(fileId: string, data: Buffer, filePath: string): void;
  /**
   * POSTs an update to the registered webhook with the registered secret in
   * X-Telegram-Bot-Api-Secret-Token (`secretToken` overrides it; null sends no header).
   * `body` is the parsed JSON answer, or its text when it is not JSON.
   */
  deliverUpdate(
    update: object,
    opts?: { secretToken?: string | null },
  ): Promise<{ status: number; body: unknown }>;
  /** The next call of `method` fails with this Telegram-shaped error; queue several for several calls. */
  failNext(method: string, answer: FailAnswer): void;
  /** While down, every connection is destroyed without an answer. */
  setDown(down: boolean): void;
  close(): Promise<void>;
}

export const FAKE_TELEGRAM_TOKEN = "123456789:FAKE-telegram-token_AbCdEf";
const MESSAGE_LIMIT = 4096;
const CAPTION_LIMIT = 1024;

function failure(answer: FailAnswer): TelegramApiError {
  const retryAfter = answer.retryAfter ?? (answer.status === 429 ? 1 : undefined);
  const defaults: Record<number, string> = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request",
    429: `Too Many Requests: retry after ${retryAfter}`,
  };
  const description =
    answer.description ??
    defaults[answer.status] ??
    (answer.status >= 500 ? "Internal Server Error" : "Error");
  return new TelegramApiError(
    answer.status,
    description,
    retryAfter === undefined ? undefined : { retry_after: retryAfter },
  );
}

// ---------------------------------------------------------------------------------------------
// The API
// ---------------------------------------------------------------------------------------------

const MEDIA_FOLDERS: Record<MediaKind, string> = {
  photo: "photos",
  voice: "voice",
  audio: "music",
  document: "documents",
};
const CHAT_ACTIONS = new Set([
  ..."typing choose_sticker find_location upload_photo upload_document".split(" "),
  ..."record_video upload_video record_voice upload_voice record_video_note upload_video_note".split(" "),
]);
const SEND_METHODS = new Set(["sendMessage", "sendPhoto", "sendVoice", "sendAudio", "sendDocument"]);

type Handler = (call: TelegramCall) => unknown;

/** Starts a fake Telegram Bot API server on 127.0.0.1 with a random port. */
export async function startFakeTelegram(options: { token?: string } = {}): Promise<FakeTelegram> {
  const token = options.token ?? FAKE_TELEGRAM_TOKEN;
  const botId = Number(token.split(":")[0]) || 123456789;
  const bot = { id: botId, is_bot: true, first_name: "Fake Stavrobot", username: "fake_stavrobot_bot" };
  const calls: TelegramCall[] = [];
  const sent: TelegramSent[] = [];
  const files = new Map<string, StoredFile>();
  const failures = new Map<string, FailAnswer[]>();
  let webhook: WebhookRegistration | undefined;
  let down = false;
  let messageIds = 0;
  let uploads = 0;

  function storeFile(file: Omit<StoredFile, "uniqueId">): StoredFile {
    const stored = { ...file, uniqueId: `AQAD${file.fileId.slice(-12)}` };
    files.set(stored.fileId, stored);
    return stored;
  }

  function fileFor(kind: MediaKind, call: TelegramCall): StoredFile {
    const upload = call.files.find((file) => file.field === kind);
    if (upload) {
      const n = ++uploads;
      const extension = upload.fileName.includes(".")
        ? upload.fileName.slice(upload.fileName.lastIndexOf("."))
        : "";
      return storeFile({
        fileId: `fake-${kind}-${n}`,
        filePath: `${MEDIA_FOLDERS[kind]}/file_${n}${extension}`,
        data: upload.data,
        fileName: upload.fileName,
        mimeType: upload.mimeType,
      });
    }
    const reference = stringParam(call.params[kind]);
    if (!reference) throw badRequest(`there is no ${kind} in the request`);
    const known = files.get(reference);
    if (known) return known;
    if (!/^https?:\/\//.test(reference)) throw badRequest("wrong file identifier/HTTP URL specified");
    const n = ++uploads;
    const fileName = reference.split("/").pop() ?? `file_${n}`;
    return storeFile({
      fileId: `fake-${kind}-${n}`,
      filePath: `${MEDIA_FOLDERS[kind]}/file_${n}`,
      data: Buffer.alloc(0),
      fileName,
    });
  }

  function message(chatId: number, content: Record<string, unknown>): FakeMessage {
    return {
      message_id: ++messageIds,
      from: bot,
      chat: { id: chatId, type: "private" },
      date: now(),
      ...content,
    };
  }

  function caption(params: Record<string, unknown>): Record<string, unknown> {
    if (params.caption === undefined) return {};
    const text = visibleText(stringParam(params.caption), params.parse_mode);
    if (text.length > CAPTION_LIMIT) throw badRequest("message caption is too long");
    return { caption: text };
  }

  const sendMedia =
    (kind: MediaKind): Handler =>
    (call) => {
      const chatId = chatIdOf(call.params);
      const file = fileFor(kind, call);
      return message(chatId, { [kind]: mediaField(kind, file), ...caption(call.params) });
    };

  const handlers: Record<string, Handler> = {
    getMe: () => ({
      ...bot,
      can_join_groups: true,
      can_read_all_group_messages: false,
      supports_inline_queries: false,
    }),
    setWebhook: ({ params }) => {
      const url = stringParam(params.url);
      const secret = params.secret_token === undefined ? undefined : stringParam(params.secret_token);
      if (secret !== undefined && !/^[\w-]{1,256}$/.test(secret)) {
        throw badRequest("secret token contains unallowed characters");
      }
      webhook = url
        ? {
            url,
            secret_token: secret,
            allowed_updates: listParam(params.allowed_updates),
            drop_pending_updates: booleanParam(params.drop_pending_updates),
          }
        : undefined;
      return true;
    },
    deleteWebhook: () => {
      webhook = undefined;
      return true;
    },
    getWebhookInfo: () => ({
      url: webhook?.url ?? "",
      has_custom_certificate: false,
      pending_update_count: 0,
      ...(webhook?.allowed_updates === undefined ? {} : { allowed_updates: webhook.allowed_updates }),
    }),
    sendMessage: ({ params }) => {
      const chatId = chatIdOf(params);
      const text = visibleText(stringParam(params.text), params.parse_mode);
      if (!text.trim()) throw badRequest("message text is empty");
      if (text.length > MESSAGE_LIMIT) throw badRequest("message is too long");
      return message(chatId, { text });
    },
    sendPhoto: sendMedia("photo"),
    sendVoice: sendMedia("voice"),
    sendAudio: sendMedia("audio"),
    sendDocument: sendMedia("document"),
    sendChatAction: ({ params }) => {
      chatIdOf(params);
      if (!CHAT_ACTIONS.has(stringParam(params.action)))
        throw badRequest("wrong parameter action in request");
      return true;
    },
    getFile: ({ params }) => {
      const file = files.get(stringParam(params.file_id));
      if (!file) throw badRequest("invalid file_id");
      return {
        file_id: file.fileId,
        file_unique_id: file.uniqueId,
        file_size: file.data.length,
        file_path: file.filePath,
      };
    },
  };
  const canonical = new Map(Object.keys(handlers).map((name) => [name.toLowerCase(), name]));

  async function callApi(req: IncomingMessage, url: URL, name: string): Promise<unknown> {
    const known = canonical.get(name.toLowerCase());
    const method = known ?? name;
    const call: TelegramCall = { method, ...(await readParams(req, url)) };
    calls.push(call);
    const handler = known === undefined ? undefined : handlers[known];
    if (!handler) throw new TelegramApiError(404, "Not Found");
    const failing = failures.get(method)?.shift();
    if (failing) throw failure(failing);
    const result = handler(call);
    if (SEND_METHODS.has(method)) sent.push({ ...call, message: result as FakeMessage });
    return result;
  }

  function download(res: ServerResponse, filePath: string): void {
    const file = [...files.values()].find((stored) => stored.filePath === filePath);
    if (!file) throw new TelegramApiError(404, "Not Found");
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": file.data.length });
    res.end(file.data);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (down) {
      req.socket.destroy();
      return;
    }
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const route = /^\/(file\/)?bot([^/]+)\/(.+)$/.exec(url.pathname);
    try {
      if (!route) throw new TelegramApiError(404, "Not Found");
      const [, isFile, given, rest = ""] = route;
      if (given !== token) throw new TelegramApiError(401, "Unauthorized");
      if (isFile) download(res, decodeURIComponent(rest));
      else sendJson(res, 200, { ok: true, result: await callApi(req, url, rest) });
    } catch (error) {
      if (!(error instanceof TelegramApiError)) throw error;
      req.resume();
      const { status, description, parameters } = error;
      sendJson(res, status, {
        ok: false,
        error_code: status,
        description,
        ...(parameters ? { parameters } : {}),
      });
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      const description = `fake Telegram: ${error instanceof Error ? error.message : String(error)}`;
      if (res.headersSent) res.destroy();
      else sendJson(res, 500, { ok: false, error_code: 500, description });
    });
  });
  server.on("connection", (socket) => {
    if (down) socket.destroy();
  });
  const port = await listen(server, 0);

  const updates = createUpdateBuilders(files, () => ++messageIds);

  return {
    url: `http://127.0.0.1:${port}`,
    token,
    calls,
    sent,
    get webhook() {
      return webhook;
    },
    addFile(fileId, data, filePath) {
      storeFile({ fileId, data, filePath });
    },
    async deliverUpdate(update, opts = {}) {
      if (!webhook) throw new Error("fake Telegram: no webhook is registered");
      const secret = opts.secretToken === undefined ? webhook.secret_token : opts.secretToken;
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (secret) headers["x-telegram-bot-api-secret-token"] = secret;
      const response = await fetch(webhook.url, { method: "POST", headers, body: JSON.stringify(update) });
      const text = await response.text();
      try {
        return { status: response.status, body: JSON.parse(text) as unknown };
      } catch {
        return { status: response.status, body: text };
      }
    },
    failNext(method, answer) {
      const name = canonical.get(method.toLowerCase()) ?? method;
      failures.set(name, [...(failures.get(name) ?? []), answer]);
    },
    setDown(value) {
      down = value;
    },
    ...updates,
    close() {
      return new Promise((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}
