/**
 * The assistant's Messages API client against pi-ai's Anthropic provider, side by side on the same
 * fake server: for every history and setting here, both must send the same request (pi-ai's
 * per-tool `eager_input_streaming` aside, see DECISIONLOG.md) and make the same assistant message
 * of the same answer. A pi-ai upgrade that changes what it sends fails here first.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  getModels,
  streamSimple,
  type Api,
  type AssistantMessage,
  type Context,
  type Message,
  type Model,
  type SimpleStreamOptions,
} from "@mariozechner/pi-ai";
import { leanPayload } from "../payload.js";
import { AnthropicWire } from "./client.js";
import { HISTORIES, PIXEL, TOOLS, answer, at } from "./wire-parity-histories.js";

interface Captured {
  headers: IncomingMessage["headers"];
  body: Record<string, unknown>;
}

/** Answers every request with `script` (raw SSE text, or an error status and body) and keeps it. */
async function startCapture() {
  const captured: Captured[] = [];
  let reply: { status: number; body: string; type: string } = {
    status: 200,
    body: "",
    type: "text/event-stream",
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      captured.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) });
      res.writeHead(reply.status, { "content-type": reply.type });
      res.end(reply.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    captured,
    answer(status: number, body: string, type = "text/event-stream") {
      reply = { status, body, type };
    },
    close: () =>
      new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

function sse(events: Record<string, unknown>[]): string {
  return events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`).join("");
}

const KEY = "sk-ant-api03-parity";
let fake: Awaited<ReturnType<typeof startCapture>>;
const wire = new AnthropicWire();

function modelNamed(id: string, changes: Partial<Model<Api>> = {}): Model<Api> {
  const known = getModels("anthropic").find((model) => model.id === id);
  if (!known) throw new Error(`pi-ai does not know ${id}`);
  return { ...known, baseUrl: fake.url, ...changes };
}

/** Runs one call through pi-ai and one through the wire; returns both requests and messages. */
async function both(model: Model<Api>, context: Context, options: SimpleStreamOptions = {}) {
  const settings = { apiKey: KEY, maxRetries: 0, ...options };
  fake.captured.length = 0;
  const theirs = await streamSimple(model, context, settings).result();
  const ours = await wire.stream(model, context, settings).result();
  const [piRequest, wireRequest] = fake.captured;
  if (!piRequest || !wireRequest) throw new Error("a request did not arrive");
  return { piRequest, wireRequest, theirs, ours };
}

type Json = Record<string, unknown>;

/**
 * pi-ai's request as the wire sends it: tools without `eager_input_streaming` (`leanPayload`), an
 * answer that is one text block as a plain string, and `is_error` only when true.
 */
function asSent(body: Json): unknown {
  const lean = leanPayload(body) as Json;
  const messages = (lean.messages as Json[]).map((message) => {
    const content = message.content;
    if (!Array.isArray(content)) return message;
    const [only] = content as Json[];
    if (
      message.role === "assistant" &&
      content.length === 1 &&
      only?.type === "text" &&
      Object.keys(only).length === 2
    )
      return { ...message, content: only.text };
    return {
      ...message,
      content: (content as Json[]).map((block) => {
        if (block.type !== "tool_result" || block.is_error !== false) return block;
        const { is_error: _false, ...rest } = block;
        return rest;
      }),
    };
  });
  return { ...lean, messages };
}

function withoutTimestamp(message: AssistantMessage): Omit<AssistantMessage, "timestamp"> {
  const { timestamp: _timestamp, ...rest } = message;
  return rest;
}

const OK = sse([
  { type: "message_start", message: { id: "msg_1", usage: { input_tokens: 10, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ok" } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } },
  { type: "message_stop" },
]);

beforeAll(async () => {
  fake = await startCapture();
});
afterAll(async () => {
  wire.close();
  await fake.close();
});

describe("the request, against pi-ai's", () => {
  for (const [name, messages] of Object.entries(HISTORIES)) {
    it(`is the same for ${name}`, async () => {
      fake.answer(200, OK);
      const context: Context = { systemPrompt: "You are \uD800helpful.", messages, tools: TOOLS };
      const { piRequest, wireRequest } = await both(modelNamed("claude-sonnet-4-5"), context, {
        cacheRetention: "short",
      });
      expect(wireRequest.body).toEqual(asSent(piRequest.body));
    });
  }

  it("stays the same as a conversation grows turn by turn, and when its start changes", async () => {
    fake.answer(200, OK);
    const model = modelNamed("claude-sonnet-4-5");
    const history: Message[] = [];
    const check = async (messages: Message[]) => {
      const { piRequest, wireRequest } = await both(model, { systemPrompt: "Hi.", messages, tools: TOOLS });
      expect(wireRequest.body).toEqual(asSent(piRequest.body));
    };
    for (let turn = 0; turn < 6; turn++) {
      history.push({ role: "user", content: `question ${turn}`, timestamp: at });
      await check(history);
      const id = `toolu_turn${turn}`;
      history.push(
        answer([
          { type: "toolCall", id, name: "execute_sql", arguments: { query: `SELECT ${turn}` } },
          // Every other turn, a second call that never gets its result.
          ...(turn % 2
            ? [{ type: "toolCall" as const, id: `${id}b`, name: "web_fetch", arguments: {} }]
            : []),
        ]),
      );
      // A call still waiting for its result is answered "No result provided" in the request.
      await check(history);
      history.push({
        role: "toolResult",
        toolCallId: id,
        toolName: "execute_sql",
        content: [{ type: "text", text: `${turn}` }],
        isError: false,
        timestamp: at,
      });
      await check(history);
      history.push(answer([{ type: "text", text: `answer ${turn}` }]));
    }
    // In their shortest form: an answer that is one text as a string, no `is_error: false`.
    const sent = JSON.stringify(fake.captured.at(-1)?.body.messages);
    expect(sent).toContain('{"role":"assistant","content":"answer 0"}');
    expect(sent).toContain('"tool_use_id":"toolu_turn0","content":"0"}');
    expect(sent).not.toContain('"is_error":false');
    // A summary rebuilt into the first message, then older messages dropped by a compaction.
    history[0] = { role: "user", content: "[Summary] question 0", timestamp: at };
    history.push({ role: "user", content: "after the summary", timestamp: at });
    await check(history);
    await check(history.slice(8));
    // The same objects again, and a copy of the array with one message in the middle replaced.
    await check(history);
    const changed = [...history];
    changed[5] = answer([{ type: "text", text: "rewritten" }]);
    await check(changed);
  });

  it("is the same for a model without image input", async () => {
    fake.answer(200, OK);
    const model = modelNamed("claude-sonnet-4-5", { input: ["text"] });
    const messages = [
      ...(HISTORIES["tool calls, results (merged, with images, errors) and calls never answered"] ?? []),
    ];
    messages.unshift({
      role: "user",
      content: [
        { type: "image", data: PIXEL, mimeType: "image/png" },
        { type: "image", data: PIXEL, mimeType: "image/png" },
        { type: "text", text: "two pictures" },
      ],
      timestamp: at,
    });
    const { piRequest, wireRequest } = await both(model, { messages });
    expect(wireRequest.body).toEqual(asSent(piRequest.body));
  });

  const SETTINGS: [string, string, SimpleStreamOptions][] = [
    [
      "no thinking, a token limit and a temperature",
      "claude-sonnet-4-5",
      { maxTokens: 1234, temperature: 0.3 },
    ],
    ["a thinking budget", "claude-sonnet-4-5", { reasoning: "medium", maxTokens: 4000, temperature: 0.3 }],
    ["xhigh on a budget model", "claude-sonnet-4-5", { reasoning: "xhigh", thinkingBudgets: { high: 5000 } }],
    ["adaptive thinking with an effort", "claude-opus-4-6", { reasoning: "low" }],
    ["adaptive thinking at xhigh", "claude-sonnet-4-6", { reasoning: "xhigh" }],
    ["a model that does not reason", "my-proxied-model", { reasoning: "high", temperature: 1 }],
    ["an effort the model maps itself", "claude-opus-4-6", { reasoning: "xhigh" }],
    ["no cache breakpoints", "claude-sonnet-4-5", { cacheRetention: "none" }],
    ["long cache retention", "claude-sonnet-4-5", { cacheRetention: "long" }],
    ["metadata", "claude-sonnet-4-5", { metadata: { user_id: "owner" } }],
  ];
  for (const [name, id, options] of SETTINGS) {
    it(`is the same with ${name}`, async () => {
      fake.answer(200, OK);
      const model = getModels("anthropic").some((known) => known.id === id)
        ? modelNamed(id)
        : modelNamed("claude-sonnet-4-5", { id, reasoning: false });
      const context: Context = {
        systemPrompt: "Be brief.",
        messages: [{ role: "user", content: "hi", timestamp: at }],
        tools: TOOLS,
      };
      const { piRequest, wireRequest } = await both(model, context, options);
      expect(wireRequest.body).toEqual(asSent(piRequest.body));
      for (const header of ["x-api-key", "anthropic-version", "anthropic-beta", "content-type"]) {
        expect(wireRequest.headers[header], header).toEqual(piRequest.headers[header]);
      }
    });
  }

  it("asks for fine-grained tool streaming and short caching where the model's compat says so", async () => {
    fake.answer(200, OK);
    const model = modelNamed("claude-sonnet-4-5", {
      compat: { supportsEagerToolInputStreaming: false, supportsLongCacheRetention: false },
    } as Partial<Model<Api>>);
    const context: Context = { messages: [{ role: "user", content: "hi", timestamp: at }], tools: TOOLS };
    const { piRequest, wireRequest } = await both(model, context, { cacheRetention: "long" });
    expect(wireRequest.body).toEqual(asSent(piRequest.body));
    expect(wireRequest.headers["anthropic-beta"]).toBe(piRequest.headers["anthropic-beta"]);
    expect(String(wireRequest.headers["anthropic-beta"])).toContain("fine-grained-tool-streaming");
  });

  it("carries the model's and the call's extra headers as pi-ai does", async () => {
    fake.answer(200, OK);
    const model = modelNamed("claude-sonnet-4-5", {
      headers: { "X-Gateway": "model", "anthropic-version": "2099" },
    });
    const context: Context = { messages: [{ role: "user", content: "hi", timestamp: at }] };
    const { piRequest, wireRequest } = await both(model, context, { headers: { "x-gateway": "call" } });
    expect(wireRequest.headers["x-gateway"]).toBe("call");
    expect(wireRequest.headers["x-gateway"]).toBe(piRequest.headers["x-gateway"]);
    expect(wireRequest.headers["anthropic-version"]).toBe(piRequest.headers["anthropic-version"]);
  });
});

describe("the answer, against pi-ai's", () => {
  const context: Context = { messages: [{ role: "user", content: "hi", timestamp: at }], tools: TOOLS };
  const ANSWERS: Record<string, string> = {
    text: OK,
    "thinking, redacted thinking and a tool call in pieces, with usage": sse([
      {
        type: "message_start",
        message: {
          id: "msg_2",
          usage: {
            input_tokens: 100,
            output_tokens: 1,
            cache_read_input_tokens: 50,
            cache_creation_input_tokens: 7,
          },
        },
      },
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "hmm, " } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "ok" } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "c2ln" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "redacted_thinking", data: "opaque" } },
      { type: "content_block_stop", index: 1 },
      { type: "ping" },
      {
        type: "content_block_start",
        index: 2,
        content_block: { type: "tool_use", id: "toolu_9", name: "execute_sql", input: {} },
      },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: '{"que' } },
      {
        type: "content_block_delta",
        index: 2,
        delta: { type: "input_json_delta", partial_json: 'ry": "SELECT 1"}' },
      },
      { type: "content_block_stop", index: 2 },
      {
        type: "message_delta",
        delta: { stop_reason: "tool_use" },
        usage: { output_tokens: 40, input_tokens: null },
      },
      { type: "message_stop" },
    ]),
    "a refusal": sse([
      { type: "message_start", message: { id: "msg_3", usage: { input_tokens: 5, output_tokens: 0 } } },
      { type: "message_delta", delta: { stop_reason: "refusal" }, usage: { output_tokens: 0 } },
      { type: "message_stop" },
    ]),
    "the token limit": sse([
      { type: "message_start", message: { id: "msg_4", usage: { input_tokens: 5, output_tokens: 0 } } },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "cut" } },
      { type: "content_block_stop", index: 0 },
      { type: "message_delta", delta: { stop_reason: "max_tokens" }, usage: { output_tokens: 9 } },
      { type: "message_stop" },
    ]),
    "an unknown stop reason": sse([
      { type: "message_start", message: { id: "msg_5", usage: { input_tokens: 5, output_tokens: 0 } } },
      { type: "message_delta", delta: { stop_reason: "new_reason" }, usage: { output_tokens: 0 } },
      { type: "message_stop" },
    ]),
    "an error event mid-stream": `${sse([
      { type: "message_start", message: { id: "msg_6", usage: { input_tokens: 5, output_tokens: 0 } } },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "par" } },
    ])}event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n`,
    "a stream cut before message_stop": sse([
      { type: "message_start", message: { id: "msg_7", usage: { input_tokens: 5, output_tokens: 0 } } },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    ]),
    "an event that is not JSON": "event: message_start\ndata: {nope\n\n",
  };
  for (const [name, script] of Object.entries(ANSWERS)) {
    it(`is the same for ${name}`, async () => {
      fake.answer(200, script);
      const { theirs, ours } = await both(modelNamed("claude-sonnet-4-5"), context);
      expect(withoutTimestamp(ours)).toEqual(withoutTimestamp(theirs));
    });
  }

  const ERRORS: [string, number, string][] = [
    [
      "a 400 with the API's error body",
      400,
      '{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}',
    ],
    ["a 401 with a top-level message", 401, '{"message":"invalid x-api-key"}'],
    ["a 500 without a body", 500, ""],
    ["a 502 from a proxy in HTML", 502, "<html>Bad Gateway</html>"],
  ];
  for (const [name, status, body] of ERRORS) {
    it(`is the same for ${name}`, async () => {
      fake.answer(status, body, "application/json");
      const { theirs, ours } = await both(modelNamed("claude-sonnet-4-5"), context);
      expect(ours.stopReason).toBe("error");
      expect(withoutTimestamp(ours)).toEqual(withoutTimestamp(theirs));
    });
  }
});
