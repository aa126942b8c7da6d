import { createServer } from "node:http";
import type { IncomingHttpHeaders, Server } from "node:http";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { closeServer, listen } from "../http/serve.js";
import { parseTelegramHtml, startFakeTelegram } from "./fake-telegram.js";
import type { FakeTelegram } from "./fake-telegram.js";

interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

let fake: FakeTelegram;

beforeEach(async () => {
  fake = await startFakeTelegram();
});
afterEach(() => fake.close());

async function answerOf(response: Response): Promise<Answer> {
  return { status: response.status, json: await response.json() };
}

/** Calls a Bot API method with a JSON body, as most clients do. */
async function call(method: string, params: object = {}, token = fake.token): Promise<Answer> {
  const response = await fetch(`${fake.url}/bot${token}/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  return answerOf(response);
}

describe("fake Telegram Bot API", () => {
  it("answers getMe, in any letter case and also over GET", async () => {
    const me = await call("getMe");
    expect(me).toEqual({
      status: 200,
      json: { ok: true, result: expect.objectContaining({ is_bot: true }) },
    });
    expect(me.json.result.id).toBe(Number(fake.token.split(":")[0]));
    expect((await call("GETME")).json.ok).toBe(true);
    const viaGet = await answerOf(await fetch(`${fake.url}/bot${fake.token}/getMe`));
    expect(viaGet.json.ok).toBe(true);
  });

  it("refuses a wrong token with 401 and an unknown method with 404, shaped like Telegram", async () => {
    expect(await call("getMe", {}, "1:wrong")).toEqual({
      status: 401,
      json: { ok: false, error_code: 401, description: "Unauthorized" },
    });
    expect(await call("sendTelepathy")).toEqual({
      status: 404,
      json: { ok: false, error_code: 404, description: "Not Found" },
    });
    expect(fake.calls.map((c) => c.method)).toEqual(["sendTelepathy"]);
  });

  it("records setWebhook, reports it in getWebhookInfo and forgets it on deleteWebhook", async () => {
    const params = {
      url: "http://127.0.0.1:1/telegram/webhook",
      secret_token: "0b7c-secret_1",
      allowed_updates: ["message"],
      drop_pending_updates: true,
    };
    expect((await call("setWebhook", params)).json).toEqual({ ok: true, result: true });
    expect(fake.webhook).toEqual(params);
    expect((await call("getWebhookInfo")).json.result).toMatchObject({
      url: params.url,
      pending_update_count: 0,
    });
    const bad = await call("setWebhook", { url: params.url, secret_token: "no spaces!" });
    expect(bad.status).toBe(400);
    expect((await call("deleteWebhook")).json.result).toBe(true);
    expect(fake.webhook).toBeUndefined();
  });

  it("parses form-encoded setWebhook parameters like Telegram does", async () => {
    const body = new URLSearchParams({
      url: "http://h/w",
      allowed_updates: '["message"]',
      secret_token: "s",
    });
    const response = await fetch(`${fake.url}/bot${fake.token}/setWebhook`, { method: "POST", body });
    expect((await answerOf(response)).json.ok).toBe(true);
    expect(fake.webhook).toEqual({
      url: "http://h/w",
      secret_token: "s",
      allowed_updates: ["message"],
      drop_pending_updates: false,
    });
  });

  it("sends messages with increasing ids and records them", async () => {
    const first = await call("sendMessage", { chat_id: 42, text: "<b>Hi</b> &amp; bye", parse_mode: "HTML" });
    expect(first.status).toBe(200);
    expect(first.json.result).toMatchObject({
      message_id: 1,
      chat: { id: 42, type: "private" },
      text: "Hi & bye",
    });
    expect(typeof first.json.result.date).toBe("number");
    const query = new URLSearchParams({ chat_id: "42", text: "second", reply_to_message_id: "1" });
    const second = await answerOf(await fetch(`${fake.url}/bot${fake.token}/sendMessage?${query}`));
    expect(second.json.result.message_id).toBe(2);
    expect(fake.sent.map((s) => [s.method, s.params.text, s.message.message_id])).toEqual([
      ["sendMessage", "<b>Hi</b> &amp; bye", 1],
      ["sendMessage", "second", 2],
    ]);
    expect(fake.sent[1]?.params).toMatchObject({ chat_id: "42", reply_to_message_id: "1" });
  });

  it("validates sendMessage like Telegram: text required, 4096 characters after parsing", async () => {
    const empty = await call("sendMessage", { chat_id: 1 });
    expect(empty.json).toEqual({
      ok: false,
      error_code: 400,
      description: "Bad Request: message text is empty",
    });
    expect((await call("sendMessage", { text: "x" })).json.description).toBe("Bad Request: chat_id is empty");
    const tooLong = await call("sendMessage", { chat_id: 1, text: "x".repeat(4097) });
    expect(tooLong).toEqual({
      status: 400,
      json: { ok: false, error_code: 400, description: "Bad Request: message is too long" },
    });
    const taggedButShort = `<b>${"&amp;".repeat(4096)}</b>`;
    expect((await call("sendMessage", { chat_id: 1, text: taggedButShort, parse_mode: "HTML" })).status).toBe(
      200,
    );
    expect(fake.sent).toHaveLength(1);
  });

  it("refuses malformed or unsupported HTML with can't parse entities", async () => {
    const bad = [
      "<b>unclosed",
      "<b><i>crossed</b></i>",
      "stray </b>",
      "<div>block</div>",
      "line<br>break",
      '<span class="x">s</span>',
      "1 < 2",
      "AT&T",
      "&copy;",
      "<b",
    ];
    for (const text of bad) {
      const answer = await call("sendMessage", { chat_id: 1, text, parse_mode: "HTML" });
      expect(answer.status, text).toBe(400);
      expect(answer.json.description, text).toMatch(/^Bad Request: can't parse entities: /);
    }
    expect(fake.sent).toHaveLength(0);
    const plain = await call("sendMessage", { chat_id: 1, text: "1 < 2 & <b" });
    expect(plain.status).toBe(200);
  });

  it("accepts every tag of Telegram's HTML mode", () => {
    const html =
      "<b>b</b><strong>s</strong><i>i</i><em>e</em><u>u</u><ins>n</ins><s>s</s><strike>k</strike><del>d</del>" +
      '<span class="tg-spoiler">p</span><tg-spoiler>t</tg-spoiler><a href="https://e.com/?a=1&amp;b">a</a>' +
      '<code>c</code><pre><code class="language-js">x &lt; y</code></pre><blockquote expandable>q</blockquote>&#128512;&#x41;&quot;';
    expect(parseTelegramHtml(html)).toBe('bsieunskdptacx < yq😀A"');
  });

  it("serves getFile and the file download for registered files", async () => {
    fake.addFile("voice-1", Buffer.from("OggS-bytes"), "voice/file_7.oga");
    const info = await call("getFile", { file_id: "voice-1" });
    expect(info.json.result).toEqual({
      file_id: "voice-1",
      file_unique_id: expect.any(String),
      file_size: 10,
      file_path: "voice/file_7.oga",
    });
    const download = await fetch(`${fake.url}/file/bot${fake.token}/${info.json.result.file_path}`);
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).toString()).toBe("OggS-bytes");

    expect((await call("getFile", { file_id: "nope" })).json.description).toBe(
      "Bad Request: invalid file_id",
    );
    expect((await fetch(`${fake.url}/file/bot${fake.token}/voice/missing.oga`)).status).toBe(404);
    expect((await fetch(`${fake.url}/file/bot1:wrong/voice/file_7.oga`)).status).toBe(401);
  });

  it("parses a multipart sendPhoto upload and makes the photo downloadable", async () => {
    const form = new FormData();
    form.set("chat_id", "42");
    form.set("caption", "<i>look</i>");
    form.set("parse_mode", "HTML");
    form.set("photo", new Blob([Buffer.from([0xff, 0xd8, 0xff, 0x01])], { type: "image/jpeg" }), "cat.jpg");
    const answer = await answerOf(
      await fetch(`${fake.url}/bot${fake.token}/sendPhoto`, { method: "POST", body: form }),
    );
    expect(answer.status).toBe(200);
    expect(answer.json.result).toMatchObject({ chat: { id: 42 }, caption: "look" });
    const [photo] = answer.json.result.photo;
    expect(photo).toMatchObject({ file_size: 4, width: expect.any(Number) });

    const [sent] = fake.sent;
    expect(sent?.params).toEqual({ chat_id: "42", caption: "<i>look</i>", parse_mode: "HTML" });
    expect(sent?.files).toEqual([
      {
        field: "photo",
        fileName: "cat.jpg",
        mimeType: "image/jpeg",
        data: Buffer.from([0xff, 0xd8, 0xff, 0x01]),
      },
    ]);
    const path = (await call("getFile", { file_id: photo.file_id })).json.result.file_path;
    const bytes = await (await fetch(`${fake.url}/file/bot${fake.token}/${path}`)).arrayBuffer();
    expect(Buffer.from(bytes)).toEqual(Buffer.from([0xff, 0xd8, 0xff, 0x01]));
  });

  it("sends voice, audio and documents by upload, known file_id or URL", async () => {
    const form = new FormData();
    form.set("chat_id", "7");
    form.set("voice", new Blob(["ogg"], { type: "audio/ogg" }), "note.ogg");
    const voice = await answerOf(
      await fetch(`${fake.url}/bot${fake.token}/sendVoice`, { method: "POST", body: form }),
    );
    expect(voice.json.result.voice).toMatchObject({ mime_type: "audio/ogg", file_size: 3 });

    fake.addFile("doc-1", Buffer.from("%PDF"), "documents/file_1.pdf");
    const byId = await call("sendDocument", { chat_id: 7, document: "doc-1" });
    expect(byId.json.result.document.file_id).toBe("doc-1");
    const byUrl = await call("sendAudio", { chat_id: 7, audio: "https://example.com/song.mp3" });
    expect(byUrl.json.result.audio).toMatchObject({ file_name: "song.mp3" });

    expect((await call("sendDocument", { chat_id: 7, document: "unknown" })).json.description).toBe(
      "Bad Request: wrong file identifier/HTTP URL specified",
    );
    expect((await call("sendPhoto", { chat_id: 7 })).json.description).toBe(
      "Bad Request: there is no photo in the request",
    );
    const longCaption = await call("sendDocument", {
      chat_id: 7,
      document: "doc-1",
      caption: "c".repeat(1025),
    });
    expect(longCaption.json.description).toBe("Bad Request: message caption is too long");
    expect(fake.sent.map((s) => s.method)).toEqual(["sendVoice", "sendDocument", "sendAudio"]);
  });

  it("accepts chat actions without counting them as sent messages", async () => {
    expect((await call("sendChatAction", { chat_id: 1, action: "typing" })).json).toEqual({
      ok: true,
      result: true,
    });
    expect((await call("sendChatAction", { chat_id: 1, action: "dancing" })).status).toBe(400);
    expect(fake.sent).toHaveLength(0);
    expect(fake.calls.map((c) => c.params.action)).toEqual(["typing", "dancing"]);
  });

  it("fails the next calls of a method on request, with retry_after on 429", async () => {
    fake.failNext("sendMessage", { status: 429, retryAfter: 3 });
    fake.failNext("sendMessage", { status: 502 });
    fake.failNext("getMe", { status: 403, description: "Forbidden: bot was kicked" });
    expect(await call("sendMessage", { chat_id: 1, text: "a" })).toEqual({
      status: 429,
      json: {
        ok: false,
        error_code: 429,
        description: "Too Many Requests: retry after 3",
        parameters: { retry_after: 3 },
      },
    });
    expect((await call("sendMessage", { chat_id: 1, text: "b" })).json).toEqual({
      ok: false,
      error_code: 502,
      description: "Internal Server Error",
    });
    expect((await call("sendMessage", { chat_id: 1, text: "c" })).status).toBe(200);
    expect((await call("getMe")).json.description).toBe("Forbidden: bot was kicked");
    expect(fake.calls).toHaveLength(4);
    expect(fake.sent.map((s) => s.params.text)).toEqual(["c"]);
  });

  it("drops every connection while down and answers again when back up", async () => {
    expect((await call("getMe")).status).toBe(200);
    fake.setDown(true);
    await expect(call("getMe")).rejects.toThrow();
    await expect(call("sendMessage", { chat_id: 1, text: "lost" })).rejects.toThrow();
    fake.setDown(false);
    expect((await call("getMe")).status).toBe(200);
    expect(fake.sent).toHaveLength(0);
  });

  it("builds updates with increasing update and message ids", () => {
    fake.addFile("big", Buffer.alloc(5_000), "photos/big.jpg");
    const text = fake.textUpdate(5, "hi", [{ type: "bold", offset: 0, length: 2 }]);
    const photo = fake.photoUpdate(5, ["small", "big"], "a caption");
    const voice = fake.voiceUpdate(5, "v1");
    const doc = fake.documentUpdate(5, "d1", "report.pdf", "application/pdf");
    expect([text, photo, voice, doc].map((u) => u.update_id)).toEqual([100_001, 100_002, 100_003, 100_004]);
    expect([text, photo, voice, doc].map((u) => u.message.message_id)).toEqual([1, 2, 3, 4]);
    expect(text.message).toMatchObject({
      chat: { id: 5, type: "private" },
      text: "hi",
      entities: [{ type: "bold" }],
    });
    expect(photo.message.photo).toMatchObject([
      { file_id: "small", width: 320 },
      { file_id: "big", width: 640, file_size: 5_000 },
    ]);
    expect(photo.message.caption).toBe("a caption");
    expect(voice.message.voice).toMatchObject({ file_id: "v1", mime_type: "audio/ogg" });
    expect(doc.message.document).toMatchObject({ file_name: "report.pdf", mime_type: "application/pdf" });
  });
});

describe("fake Telegram webhook delivery", () => {
  const received: { headers: IncomingHttpHeaders; body: string }[] = [];
  let app: Server;
  let webhookUrl: string;

  beforeAll(async () => {
    app = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
        const ok = req.headers["x-telegram-bot-api-secret-token"] === "s3cret";
        res.writeHead(ok ? 200 : 403, { "content-type": "application/json" });
        res.end(JSON.stringify(ok ? { ok: true } : { error: "Forbidden" }));
      });
    });
    webhookUrl = `http://127.0.0.1:${await listen(app, 0)}/telegram/webhook`;
  });
  afterAll(() => closeServer(app));
  beforeEach(() => void (received.length = 0));

  it("POSTs the update as JSON with the registered secret header", async () => {
    await call("setWebhook", { url: webhookUrl, secret_token: "s3cret" });
    const update = fake.textUpdate(9, "hello");
    expect(await fake.deliverUpdate(update)).toEqual({ status: 200, body: { ok: true } });
    expect(received).toHaveLength(1);
    expect(received[0]?.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(received[0]?.body ?? "")).toEqual(update);
  });

  it("sends an overridden secret, or none, for negative tests", async () => {
    await call("setWebhook", { url: webhookUrl, secret_token: "s3cret" });
    const update = fake.textUpdate(9, "hello");
    expect(await fake.deliverUpdate(update, { secretToken: "wrong" })).toEqual({
      status: 403,
      body: { error: "Forbidden" },
    });
    expect((await fake.deliverUpdate(update, { secretToken: null })).status).toBe(403);
    expect(received.map((r) => r.headers["x-telegram-bot-api-secret-token"])).toEqual(["wrong", undefined]);
  });

  it("refuses to deliver without a registered webhook", async () => {
    await expect(fake.deliverUpdate(fake.textUpdate(1, "x"))).rejects.toThrow(/no webhook/);
  });
});
