#!/usr/bin/env node
/**
 * fake-signal-cli: a stand-in for `signal-cli [--config DIR] -a ACCOUNT daemon --http HOST:PORT` in tests.
 * It speaks the daemon's HTTP interface without touching Signal, plus test-only control routes under /test/.
 *
 * What the real daemon does, and where that was checked (AsamK/signal-cli unless noted):
 * - man/signal-cli-jsonrpc.5.adoc: `--http` exposes POST /api/v1/rpc (single or batch JSON-RPC request),
 *   GET /api/v1/events (Server-Sent Events of incoming messages) and GET /api/v1/check (200 if running);
 *   each event has an `id`; the last 1000 are kept and a client reconnecting with `Last-Event-ID` first gets
 *   the ones after it (an unknown id, e.g. from before a restart, replays all kept events).
 * - src/.../http/HttpServerHandler.java: /rpc needs POST (else 405) and a Content-Type starting with
 *   application/json (else 415); it answers 200 with the JSON-RPC response, or 201 with no body when the
 *   request was a notification. /events needs GET, answers `Content-Type: text/event-stream` and sends a
 *   keep-alive every 15 s. /check answers 200 with an empty body. Other paths under them: 404.
 * - src/.../http/ServerSentEventSender.java and SseEventBuffer.java: events are written as
 *   `id:<start millis>-<seq>\nevent:receive\ndata:<json>\n\n` (no space after the colons); keep-alive is `:\n`.
 * - src/.../json/JsonReceiveMessageHandler.java: the data is `{"account": ..., "envelope": {...}}`; the
 *   envelope carries source, sourceNumber, sourceUuid, sourceName, sourceDevice, timestamp and dataMessage
 *   {timestamp, message, expiresInSeconds, viewOnce, attachments?, textStyles?} (json/JsonDataMessage.java);
 *   an attachment is {contentType, filename, id, size, width, height, caption, uploadTimestamp}
 *   (json/JsonAttachment.java), nulls included; textStyles are {style, start, length} (JsonTextStyle.java).
 * - lib/.../manager/AttachmentStore.java + api/MessageEnvelope.java: a received attachment is stored as
 *   `<data dir>/attachments/<remote id><.ext>` (ext from the file name, else guessed from the MIME type) and
 *   the JSON `id` is that file name. Voice notes from the Signal apps carry no file name.
 * - src/.../commands/SendCommand.java: `send` takes recipient(s), message, attachment(s) (file paths or
 *   `data:<mime>;filename=<name>;base64,<data>` URIs) and textStyle(s) `start:length:STYLE` (regex
 *   `(\d+):(\d+):(.+)`); bad syntax or an empty message is a user error. JsonRpcNamespace.java: a list
 *   parameter may be given as `attachment` (one value) or `attachments` (array), likewise textStyle(s).
 * - jsonrpc/SignalJsonRpcCommandHandler.java + JsonRpcResponse.java: user errors are code -1 with
 *   `data: {response: <command output>}`, unknown methods -32601 "Method not implemented".
 * - Issue #1558 (real daemon output): a rate limit is `{"code":-5,"message":"Failed to send message due to
 *   rate limiting","data":{"response":{"timestamp":..,"results":[{"recipientAddress":{"uuid":..,"number":..},
 *   "type":"RATE_LIMIT_FAILURE","token":"<challenge>","retryAfterSeconds":86400}]}}}`; the token is what
 *   `submitRateLimitChallenge {challenge, captcha}` takes (SubmitRateLimitChallengeCommand.java), and a
 *   rejected captcha is a user error. Issue #923 shows the plain failure shape (code -1, "Failed to send
 *   message", results with type NETWORK_FAILURE).
 * - Style offsets are UTF-16 code units (issue #1504, PR #1505).
 *
 * Command-line parsing lives in fake-signal-cli-args.mjs, the inbound envelope in fake-signal-cli-envelope.mjs.
 * Test routes: POST /test/inbound, POST /test/envelope (emit any envelope as given: receipts, typing, groups),
 * GET /test/sent, POST /test/rate-limit, POST /test/fail-send, GET /test/challenges, POST /test/drop-streams
 * (end every event stream but keep running), POST /test/exit `{code?, stderr?}` (a last line on stderr, then exit). Env: FAKE_SIGNAL_STATE (JSON file every recorded send is appended
 * to, surviving restarts), FAKE_SIGNAL_KEEPALIVE_MS (keep-alive period, default 15000).
 */
import { Buffer } from "node:buffer";
import { randomUUID } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { basename } from "node:path";
import process from "node:process";
import { setInterval } from "node:timers";
import { URL } from "node:url";
import { parseCommandLine } from "./fake-signal-cli-args.mjs";
import { address, inboundEnvelope } from "./fake-signal-cli-envelope.mjs";

const options = parseCommandLine(process.argv.slice(2));
const state = {
  clients: new Set(),
  /** Kept events for Last-Event-ID replay: {sequence, id, data}. */
  events: [],
  idPrefix: `${Date.now()}-`,
  nextSequence: 1,
  sent: [],
  /** Failures armed by /test/rate-limit and /test/fail-send, used by the next sends in order. */
  failures: [],
  challenges: [],
  issuedTokens: new Set(),
};

const server = createServer((request, response) => {
  route(request, response).catch((error) => {
    process.stderr.write(`fake-signal-cli: ${error?.stack ?? error}\n`);
    const status = error instanceof SyntaxError ? 400 : 500; // a test sent a bad JSON body
    if (!response.headersSent) sendJson(response, status, { error: String(error?.message ?? error) });
    else response.destroy();
  });
});

async function route(request, response) {
  const path = new URL(request.url ?? "/", "http://fake").pathname;
  const method = request.method ?? "GET";
  if (path === "/api/v1/check") return method === "GET" ? sendEmpty(response, 200) : sendEmpty(response, 405);
  if (path === "/api/v1/events")
    return method === "GET" ? openEventStream(request, response) : sendEmpty(response, 405);
  if (path === "/api/v1/rpc")
    return method === "POST" ? handleRpc(request, response) : sendEmpty(response, 405);
  const testRoute = testRoutes[`${method} ${path}`];
  if (testRoute) return testRoute(request, response);
  return sendEmpty(response, 404);
}

function sendEmpty(response, status) {
  response.writeHead(status, { "Content-Length": "0" }).end();
}

function sendJson(response, status, body) {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
  });
  response.end(text);
}

async function readBody(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

async function readJsonBody(request) {
  const text = await readBody(request);
  return text.trim() === "" ? {} : JSON.parse(text);
}

// ---- Server-Sent Events ----

function openEventStream(request, response) {
  response.writeHead(200, { "Content-Type": "text/event-stream" });
  response.flushHeaders();
  const lastEventId = request.headers["last-event-id"];
  if (typeof lastEventId === "string") {
    const after = lastEventId.startsWith(state.idPrefix)
      ? Number(lastEventId.slice(state.idPrefix.length)) || 0
      : 0;
    for (const event of state.events) if (event.sequence > after) response.write(formatEvent(event));
  }
  state.clients.add(response);
  response.on("close", () => state.clients.delete(response));
}

function formatEvent(event) {
  return `id:${event.id}\nevent:receive\ndata:${event.data}\n\n`;
}

function broadcast(payload) {
  const sequence = state.nextSequence++;
  const event = { sequence, id: `${state.idPrefix}${sequence}`, data: JSON.stringify(payload) };
  state.events.push(event);
  if (state.events.length > 1000) state.events.shift();
  for (const client of state.clients) client.write(formatEvent(event));
  return event;
}

const keepAliveMs = Number(process.env.FAKE_SIGNAL_KEEPALIVE_MS) || 15_000;
setInterval(() => {
  for (const client of state.clients) client.write(":\n");
}, keepAliveMs);

// ---- JSON-RPC ----

class RpcError extends Error {
  constructor(code, message, data = null) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

async function handleRpc(request, response) {
  const contentType = request.headers["content-type"] ?? "";
  if (!contentType.startsWith("application/json")) return sendEmpty(response, 415);
  let body;
  try {
    body = JSON.parse(await readBody(request));
  } catch (error) {
    return sendJson(response, 200, rpcFailure(null, new RpcError(-32700, `Parse error: ${error.message}`)));
  }
  const requests = Array.isArray(body) ? body : [body];
  const answers = [];
  for (const call of requests) {
    const answer = await answerCall(call);
    if (answer) answers.push(answer);
  }
  if (answers.length === 0) return sendEmpty(response, 201);
  return sendJson(response, 200, Array.isArray(body) ? answers : answers[0]);
}

/** Runs one call; returns its response, or undefined for a notification (a request without an id). */
async function answerCall(call) {
  const id = call && typeof call === "object" && "id" in call ? call.id : undefined;
  try {
    if (!call || typeof call !== "object" || typeof call.method !== "string") {
      throw new RpcError(-32600, "method field must be set");
    }
    const handler = rpcMethods[call.method];
    if (!handler) throw new RpcError(-32601, "Method not implemented");
    const result = await handler(call.params ?? {});
    return id === undefined ? undefined : { jsonrpc: "2.0", result, id };
  } catch (error) {
    if (!(error instanceof RpcError))
      process.stderr.write(`ERROR fake-signal-cli - ${error?.stack ?? error}\n`);
    const failure =
      error instanceof RpcError ? error : new RpcError(-32603, "An internal server error has occurred.");
    return id === undefined && failure.code !== -32600 ? undefined : rpcFailure(id ?? null, failure);
  }
}

function rpcFailure(id, error) {
  return { jsonrpc: "2.0", error: { code: error.code, message: error.message, data: error.data }, id };
}

const rpcMethods = {
  version: async () => ({ version: "0.13.99-fake" }),
  send: sendMessage,
  submitRateLimitChallenge: async (params) => {
    state.challenges.push({ challenge: params.challenge, captcha: params.captcha });
    if (!state.issuedTokens.delete(params.challenge)) {
      throw new RpcError(
        -1,
        "Captcha rejected, it may be outdated, already used or solved from a different IP address.",
      );
    }
    return {};
  },
};

/** signal-cli accepts a list parameter under its singular name (one value or array) or its plural name. */
function listParam(params, name) {
  const value = params[name] ?? params[`${name}s`];
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}

async function sendMessage(params) {
  const recipients = listParam(params, "recipient").map(String);
  const groupIds = listParam(params, "groupId").map(String);
  if (recipients.length === 0 && groupIds.length === 0 && params.noteToSelf !== true) {
    throw new RpcError(-1, "No recipients given");
  }
  const message = typeof params.message === "string" ? params.message : "";
  const textStyles = listParam(params, "textStyle").map(String);
  for (const style of textStyles) {
    const match = /^(\d+):(\d+):(.+)$/.exec(style);
    if (!match) throw new RpcError(-1, `Invalid textStyle syntax (${style}) expected 'start:length:STYLE'`);
    if (!["NONE", "BOLD", "ITALIC", "SPOILER", "STRIKETHROUGH", "MONOSPACE"].includes(match[3])) {
      throw new RpcError(-1, `Invalid style: ${match[3]}`);
    }
  }
  const attachmentRefs = listParam(params, "attachment").map(String);
  if (message === "" && attachmentRefs.length === 0) {
    throw new RpcError(
      -1,
      "Sending empty message is not allowed, either a message, attachment or sticker must be given.",
    );
  }
  const attachments = [];
  for (const ref of attachmentRefs) attachments.push(await loadAttachment(ref));

  const timestamp = Date.now();
  const failure = state.failures.shift();
  if (failure) throw failure(recipients, timestamp);
  const results = recipients.map((number) => ({ recipientAddress: address(number), type: "SUCCESS" }));
  const send = {
    timestamp,
    account: options.account ?? params.account ?? null,
    recipients,
    groupIds,
    message,
  };
  recordSend({ ...send, textStyles, attachments, params });
  return { timestamp, results };
}

/** Reads an attachment the moment `send` runs, as signal-cli does, so later changes to the file do not matter. */
async function loadAttachment(ref) {
  const dataUri = /^data:([^;,]*)((?:;[^;,=]+=[^;,]*)*);base64,(.*)$/s.exec(ref);
  if (dataUri) {
    const filename = /;filename=([^;,]*)/.exec(dataUri[2] ?? "")?.[1] ?? null;
    const bytes = Buffer.from(dataUri[3] ?? "", "base64");
    return {
      path: null,
      filename,
      contentType: dataUri[1] || null,
      size: bytes.length,
      data: bytes.toString("base64"),
    };
  }
  try {
    const bytes = await readFile(ref);
    return {
      path: ref,
      filename: basename(ref),
      contentType: null,
      size: bytes.length,
      data: bytes.toString("base64"),
    };
  } catch (error) {
    const reason = `Failed to send message: ${ref}: ${error.code ?? error.message} (AttachmentInvalidException)`;
    throw new RpcError(-32603, `${reason} (UnexpectedErrorException)`);
  }
}

function recordSend(send) {
  state.sent.push(send);
  const file = process.env.FAKE_SIGNAL_STATE;
  if (!file) return;
  let recorded = [];
  try {
    recorded = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    recorded = [];
  }
  recorded.push(send);
  writeFileSync(`${file}.tmp`, JSON.stringify(recorded, null, 2));
  renameSync(`${file}.tmp`, file);
}

// ---- Test control routes ----

const testRoutes = {
  "POST /test/inbound": async (request, response) => {
    const body = await readJsonBody(request);
    if (typeof body.source !== "string" || body.source === "") {
      return sendJson(response, 400, { error: "source (a phone number) is required" });
    }
    const event = broadcast({
      envelope: inboundEnvelope(body, options.config),
      account: options.account ?? null,
    });
    return sendJson(response, 200, { id: event.id, event: JSON.parse(event.data) });
  },
  "POST /test/envelope": async (request, response) => {
    const envelope = await readJsonBody(request);
    const event = broadcast({ envelope, account: options.account ?? null });
    return sendJson(response, 200, { id: event.id });
  },
  "POST /test/drop-streams": async (_request, response) => {
    const dropped = state.clients.size;
    for (const client of state.clients) client.destroy();
    state.clients.clear();
    return sendJson(response, 200, { dropped });
  },
  "GET /test/sent": async (_request, response) => sendJson(response, 200, state.sent),
  "GET /test/challenges": async (_request, response) => sendJson(response, 200, state.challenges),
  "POST /test/rate-limit": async (request, response) => {
    const body = await readJsonBody(request);
    const token = typeof body.token === "string" ? body.token : randomUUID();
    const retryAfterSeconds = Number.isInteger(body.retryAfterSeconds) ? body.retryAfterSeconds : 86_400;
    state.issuedTokens.add(token);
    state.failures.push((recipients, timestamp) => {
      const results = recipients.map((number) => ({
        recipientAddress: address(number),
        type: "RATE_LIMIT_FAILURE",
        token,
        retryAfterSeconds,
      }));
      return new RpcError(-5, "Failed to send message due to rate limiting", {
        response: { timestamp, results },
      });
    });
    return sendJson(response, 200, { token, retryAfterSeconds });
  },
  "POST /test/fail-send": async (request, response) => {
    const body = await readJsonBody(request);
    state.failures.push((recipients, timestamp) => {
      if (typeof body.code === "number") return new RpcError(body.code, String(body.message ?? "Failed"));
      const results = recipients.map((number) => ({
        recipientAddress: address(number),
        type: "NETWORK_FAILURE",
      }));
      return new RpcError(-1, "Failed to send message", { response: { timestamp, results } });
    });
    return sendJson(response, 200, { ok: true });
  },
  "POST /test/exit": async (request, response) => {
    const body = await readJsonBody(request);
    const code = Number.isInteger(body.code) ? body.code : 1;
    // What signal-cli says on stderr before it stops (an unregistered account, a broken config).
    if (typeof body.stderr === "string") process.stderr.write(`${body.stderr}\n`);
    response.writeHead(200, { "Content-Type": "application/json" });
    response.end(JSON.stringify({ ok: true, code }), () => {
      for (const client of state.clients) client.destroy(); // abrupt, like a crashing JVM
      process.exit(code);
    });
  },
};

server.on("error", (error) => {
  process.stderr.write(`ERROR HttpServerHandler - Failed to start HTTP server: ${error.message}\n`);
  process.exit(3);
});
server.listen(options.port, options.host, () => {
  const account = options.account ?? "(multi-account)";
  process.stderr.write(
    `INFO  HttpServerHandler - Started HTTP server on /${options.host}:${options.port} (fake-signal-cli, ${account})\n`,
  );
});
