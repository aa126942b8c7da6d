import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { getModels, type Api, type Context, type Model } from "@mariozechner/pi-ai";
import { freePort } from "@stavrobot/common/test-support";
import { AnthropicWire } from "./client.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A server that answers the n-th request with the n-th handler, counting connections. */
async function scripted(...handlers: Handler[]) {
  const requests: { headers: IncomingMessage["headers"]; body: string }[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      requests.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      const handler = handlers[Math.min(requests.length - 1, handlers.length - 1)] as Handler;
      handler(req, res);
    });
  });
  server.on("connection", (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

const sse = (events: Record<string, unknown>[]) =>
  events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`).join("");

const ANSWER = [
  { type: "message_start", message: { id: "msg_1", usage: { input_tokens: 3, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "hello" } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } },
  { type: "message_stop" },
];

const ok: Handler = (_req, res) => {
  const body = sse(ANSWER);
  res.writeHead(200, { "content-type": "text/event-stream", "content-length": Buffer.byteLength(body) });
  res.end(body);
};
const status =
  (
    code: number,
    headers: Record<string, string> = {},
    body = '{"type":"error","error":{"message":"busy"}}',
  ): Handler =>
  (_req, res) => {
    res.writeHead(code, { "content-type": "application/json", ...headers });
    res.end(body);
  };

const base = getModels("anthropic").find((model) => model.id === "claude-sonnet-4-5") as Model<Api>;
const context: Context = { messages: [{ role: "user", content: "hi", timestamp: 1 }] };
const wire = new AnthropicWire();
const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function serve(...handlers: Handler[]) {
  const server = await scripted(...handlers);
  servers.push(server);
  return { server, model: { ...base, baseUrl: server.url } };
}

describe("AnthropicWire", () => {
  it("serves Messages API models with an API key and leaves the rest to pi-ai", () => {
    expect(AnthropicWire.handles(base, "sk-ant-api03-x")).toBe(true);
    expect(AnthropicWire.handles({ ...base, provider: "my-gateway" }, "key")).toBe(true);
    // Subscription tokens: the request must look like Claude Code's, which pi-ai does.
    expect(AnthropicWire.handles(base, "sk-ant-oat01-x")).toBe(false);
    expect(AnthropicWire.handles(base, undefined)).toBe(false);
    expect(AnthropicWire.handles({ ...base, provider: "github-copilot" }, "key")).toBe(false);
    expect(AnthropicWire.handles({ ...base, api: "openai-completions" }, "key")).toBe(false);
  });

  it("streams the answer and reuses one kept-alive connection (opened by preconnect) for later calls", async () => {
    const { server, model } = await serve(ok);
    await wire.preconnect(model.baseUrl);
    const events: string[] = [];
    const stream = wire.stream(model, context, { apiKey: "sk-ant-api03-x" });
    for await (const event of stream) events.push(event.type);
    const first = await stream.result();
    expect(events).toEqual(["start", "text_start", "text_delta", "text_end", "done"]);
    expect(first).toMatchObject({
      stopReason: "stop",
      responseId: "msg_1",
      content: [{ type: "text", text: "hello" }],
    });
    expect(first.usage).toMatchObject({ input: 3, output: 2, totalTokens: 5 });
    await wire.stream(model, context, { apiKey: "sk-ant-api03-x" }).result();
    // The HEAD of preconnect (no credentials) and both calls, on one connection.
    expect(server.requests).toHaveLength(3);
    expect(server.connections()).toBe(1);
    expect(server.requests[0]?.headers["x-api-key"]).toBeUndefined();
    expect(server.requests[1]?.headers["x-api-key"]).toBe("sk-ant-api03-x");
    expect(JSON.parse(server.requests[1]?.body ?? "{}")).toMatchObject({
      model: "claude-sonnet-4-5",
      stream: true,
    });
  });

  it("retries overloads and rate limits as the server asks, then answers", async () => {
    const { server, model } = await serve(
      status(529, { "retry-after-ms": "5" }),
      status(429, { "retry-after": "0" }),
      ok,
    );
    let requestsLeft = 0;
    const answer = await wire
      .stream(model, context, { apiKey: "k", onRequest: () => requestsLeft++ })
      .result();
    expect(answer.stopReason).toBe("stop");
    expect(server.requests).toHaveLength(3);
    expect(requestsLeft).toBe(1);
  });

  it("gives up after its retries with the API's error text", async () => {
    const { server, model } = await serve(status(500, { "retry-after-ms": "1" }));
    const answer = await wire.stream(model, context, { apiKey: "k" }).result();
    expect(server.requests).toHaveLength(3);
    expect(answer).toMatchObject({
      stopReason: "error",
      errorMessage: '500 {"type":"error","error":{"message":"busy"}}',
      content: [],
    });
  });

  it("does not retry a refusal, nor what the server says not to retry", async () => {
    const first = await serve(status(400));
    expect((await wire.stream(first.model, context, { apiKey: "k" }).result()).stopReason).toBe("error");
    expect(first.server.requests).toHaveLength(1);
    const second = await serve(status(503, { "x-should-retry": "false" }));
    await wire.stream(second.model, context, { apiKey: "k" }).result();
    expect(second.server.requests).toHaveLength(1);
  });

  it("says so when the host cannot be reached", async () => {
    const port = await freePort();
    const model = { ...base, baseUrl: `http://127.0.0.1:${port}` };
    const answer = await wire.stream(model, context, { apiKey: "k", maxRetries: 1 }).result();
    expect(answer).toMatchObject({ stopReason: "error", errorMessage: "Connection error." });
  });

  it("times out a host that never answers", async () => {
    const { model } = await serve(() => {});
    const answer = await wire.stream(model, context, { apiKey: "k", timeoutMs: 50, maxRetries: 0 }).result();
    expect(answer).toMatchObject({ stopReason: "error", errorMessage: "Request timed out." });
  });

  it("stops at once when aborted while the answer streams, keeping only finished blocks", async () => {
    const { model } = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse(ANSWER.slice(0, 3)));
    });
    const controller = new AbortController();
    const stream = wire.stream(model, context, { apiKey: "k", signal: controller.signal });
    for await (const event of stream) if (event.type === "text_delta") controller.abort();
    const answer = await stream.result();
    expect(answer.stopReason).toBe("aborted");
    expect(answer.content).toEqual([{ type: "text", text: "hello" }]);
  });

  it("is aborted before it asks when the signal already fired, and while it waits to retry", async () => {
    const { server, model } = await serve(status(529, { "retry-after-ms": "10000" }));
    const controller = new AbortController();
    const stream = wire.stream(model, context, { apiKey: "k", signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    expect((await stream.result()).stopReason).toBe("aborted");
    expect(server.requests).toHaveLength(1);
    expect(
      (await wire.stream(model, context, { apiKey: "k", signal: controller.signal }).result()).stopReason,
    ).toBe("aborted");
    expect(server.requests).toHaveLength(1);
  });

  it("reads events split anywhere, with CRLF line ends and comments", async () => {
    const text = `: hello\r\n${sse(ANSWER).replaceAll("\n", "\r\n")}`;
    const { model } = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let at = 0;
      const next = () => {
        if (at >= text.length) return res.end();
        res.write(text.slice(at, at + 7));
        at += 7;
        setImmediate(next);
      };
      next();
    });
    const answer = await wire.stream(model, context, { apiKey: "k" }).result();
    expect(answer).toMatchObject({ stopReason: "stop", content: [{ type: "text", text: "hello" }] });
  });

  it("reports a connection dropped in the middle of an answer", async () => {
    const { model } = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse(ANSWER.slice(0, 3)), () => res.destroy());
    });
    const answer = await wire.stream(model, context, { apiKey: "k", maxRetries: 0 }).result();
    expect(answer.stopReason).toBe("error");
    expect(answer.errorMessage).toBe("The connection closed before the answer was complete.");
  });
});
