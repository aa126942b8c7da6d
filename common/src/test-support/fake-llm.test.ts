import { complete, getModel, stream, Type } from "@mariozechner/pi-ai";
import type { AssistantMessage, Context, Model, Tool, ToolResultMessage } from "@mariozechner/pi-ai";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { setTimeout as sleep } from "node:timers/promises";
import { FAKE_ANTHROPIC_MODELS, startFakeAnthropic } from "./fake-anthropic.js";
import { textTurn, toolTurn } from "./fake-llm.js";
import type { FakeLlmServer } from "./fake-llm.js";
import { FAKE_OPENAI_MODEL_ID, startFakeOpenAI } from "./fake-openai.js";

const API_KEY = "sk-ant-api03-fake";

const getTime: Tool = {
  name: "get_time",
  description: "Returns the current time in a timezone.",
  parameters: Type.Object({ timezone: Type.String() }),
};

function userContext(text: string, systemPrompt = "You are a test assistant."): Context {
  return {
    systemPrompt,
    messages: [{ role: "user", content: text, timestamp: Date.now() }],
    tools: [getTime],
  };
}

function toolResult(call: AssistantMessage, text: string): ToolResultMessage {
  const toolCall = call.content.find((block) => block.type === "toolCall");
  if (!toolCall) throw new Error("expected a tool call");
  return {
    role: "toolResult",
    toolCallId: toolCall.id,
    toolName: toolCall.name,
    content: [{ type: "text", text }],
    isError: false,
    timestamp: Date.now(),
  };
}

function textOf(message: AssistantMessage): string {
  return message.content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("");
}

describe("fake Anthropic server with the real pi-ai client", () => {
  let fake: FakeLlmServer;
  let claude: Model<"anthropic-messages">;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    claude = { ...getModel("anthropic", "claude-sonnet-4-5"), baseUrl: fake.url };
  });
  beforeEach(() => fake.reset());
  afterAll(() => fake.close());

  it("streams text and a tool call, then a final answer", async () => {
    const context = userContext("What time is it in Berlin?");
    fake.enqueue(toolTurn("get_time", { timezone: "Europe/Berlin" }, "Let me check."));
    const first = await complete(claude, context, { apiKey: API_KEY });
    expect(first.stopReason).toBe("toolUse");
    expect(textOf(first)).toBe("Let me check.");
    expect(first.content[1]).toMatchObject({
      type: "toolCall",
      id: "toolu_1",
      name: "get_time",
      arguments: { timezone: "Europe/Berlin" },
    });
    expect(first.usage.input).toBeGreaterThan(0);
    expect(first.usage.output).toBeGreaterThan(0);

    context.messages.push(first, toolResult(first, "12:00"));
    fake.enqueue(textTurn("It is noon in Berlin."));
    const second = await complete(claude, context, { apiKey: API_KEY });
    expect(second.stopReason).toBe("stop");
    expect(textOf(second)).toBe("It is noon in Berlin.");

    expect(fake.requests).toHaveLength(2);
    const [firstRequest, secondRequest] = fake.requests;
    expect(firstRequest?.path).toBe("/v1/messages");
    expect(firstRequest?.headers["x-api-key"]).toBe(API_KEY);
    expect(firstRequest?.lastUserText).toBe("What time is it in Berlin?");
    expect(firstRequest?.body.stream).toBe(true);
    expect(firstRequest?.body.system).toEqual([
      expect.objectContaining({ text: "You are a test assistant." }),
    ]);
    expect(firstRequest?.body.tools[0].name).toBe("get_time");
    expect(secondRequest?.body.messages).toHaveLength(3);
    expect(secondRequest?.lastUserText).toBe("12:00");
  });

  it("emulates prompt caching across requests sharing a long system prompt", async () => {
    const system = "You are a meticulous assistant. Follow every rule. ".repeat(200);
    fake.enqueue(textTurn("one"), textTurn("two"));
    const first = await complete(claude, userContext("first question", system), { apiKey: API_KEY });
    const second = await complete(claude, userContext("second question", system), { apiKey: API_KEY });
    expect(first.usage.cacheRead).toBe(0);
    expect(first.usage.cacheWrite).toBeGreaterThan(2000);
    expect(second.usage.cacheRead).toBeGreaterThan(2000);
    expect(second.usage.cacheWrite).toBeGreaterThan(0);
    expect(second.usage.cacheWrite).toBeLessThan(100);
  });

  it("reads the earlier conversation from the cache when it grows", async () => {
    const context = userContext("What time is it?");
    fake.enqueue(toolTurn("get_time", { timezone: "UTC" }), textTurn("Noon."));
    const first = await complete(claude, context, { apiKey: API_KEY });
    context.messages.push(first, toolResult(first, "12:00"));
    const second = await complete(claude, context, { apiKey: API_KEY });
    expect(first.usage.cacheRead).toBe(0);
    expect(second.usage.cacheRead).toBe(first.usage.cacheWrite);
    expect(second.usage.cacheWrite).toBeGreaterThan(0);
    expect(second.usage.input).toBe(first.usage.input);
  });

  it("reports every input token uncached when prompt caching is not emulated", async () => {
    const plain = await startFakeAnthropic({ promptCache: false });
    try {
      const model = { ...claude, baseUrl: plain.url };
      const system = "You are a meticulous assistant. Follow every rule. ".repeat(200);
      plain.enqueue(textTurn("one"), textTurn("two"));
      await complete(model, userContext("first question", system), { apiKey: API_KEY });
      const second = await complete(model, userContext("second question", system), { apiKey: API_KEY });
      expect(second.usage.cacheRead).toBe(0);
      expect(second.usage.cacheWrite).toBe(0);
      expect(second.usage.input).toBeGreaterThan(2000);
    } finally {
      await plain.close();
    }
  });

  it("turns an HTTP error turn into an error message", async () => {
    const body = { type: "error", error: { type: "invalid_request_error", message: "bad" } };
    fake.enqueue({ content: [], error: { status: 400, body } });
    const reply = await complete(claude, userContext("hi"), { apiKey: API_KEY, maxRetries: 0 });
    expect(reply.stopReason).toBe("error");
    expect(reply.errorMessage).toContain("400");
  });

  it("fails loudly when no turn is scripted", async () => {
    const reply = await complete(claude, userContext("hi"), { apiKey: API_KEY, maxRetries: 0 });
    expect(reply.stopReason).toBe("error");
    expect(reply.errorMessage).toContain("no scripted turn left");
  });

  it("holds a gated turn until the gate resolves", async () => {
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    fake.enqueue({ ...textTurn("late answer"), gate });
    let settled = false;
    const pending = complete(claude, userContext("hi"), { apiKey: API_KEY }).finally(() => (settled = true));
    await vi.waitFor(() => expect(fake.requests).toHaveLength(1));
    // Held, not merely slow.
    await sleep(100);
    expect(settled).toBe(false);
    open();
    expect(textOf(await pending)).toBe("late answer");
  });

  it("stops waiting on a gate when the client aborts", async () => {
    fake.enqueue({ ...textTurn("never"), gate: new Promise(() => undefined) }, textTurn("next"));
    const controller = new AbortController();
    const pending = complete(claude, userContext("hi"), { apiKey: API_KEY, signal: controller.signal });
    await vi.waitFor(() => expect(fake.requests).toHaveLength(1));
    controller.abort();
    expect((await pending).stopReason).toBe("aborted");
    expect(textOf(await complete(claude, userContext("again"), { apiKey: API_KEY }))).toBe("next");
  });

  it("streams thinking with a signature and uses a responder", async () => {
    fake.setResponder((request) => ({
      content: [
        { type: "thinking", thinking: "The user said " + request.lastUserText },
        { type: "text", text: "Echo: " + request.lastUserText },
      ],
      chunkDelayMs: 2,
    }));
    const events: string[] = [];
    const events$ = stream(claude, userContext("ping"), { apiKey: API_KEY });
    for await (const event of events$) events.push(event.type);
    const reply = await events$.result();
    expect(reply.content[0]).toMatchObject({ type: "thinking", thinking: "The user said ping" });
    expect(reply.content[0]).toHaveProperty("thinkingSignature", expect.stringMatching(/.+/));
    expect(textOf(reply)).toBe("Echo: ping");
    expect(events).toContain("thinking_delta");
    expect(events.at(-1)).toBe("done");
  });

  it("answers non-streaming requests with a Messages JSON body", async () => {
    fake.enqueue(toolTurn("get_time", { timezone: "UTC" }, "Checking."));
    const response = await fetch(`${fake.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }),
    });
    const body = (await response.json()) as {
      stop_reason: string;
      content: unknown[];
      usage: { input_tokens: number };
    };
    expect(body.stop_reason).toBe("tool_use");
    expect(body.content[1]).toMatchObject({ type: "tool_use", name: "get_time", input: { timezone: "UTC" } });
    expect(body.usage.input_tokens).toBeGreaterThan(0);
  });
});

describe("fake OpenAI server with the real pi-ai client", () => {
  let fake: FakeLlmServer;
  let model: Model<"openai-completions">;

  beforeAll(async () => {
    fake = await startFakeOpenAI();
    model = {
      id: FAKE_OPENAI_MODEL_ID,
      name: "Fake model",
      api: "openai-completions",
      provider: "fake",
      baseUrl: `${fake.url}/v1`,
      reasoning: false,
      input: ["text"],
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      contextWindow: 32768,
      maxTokens: 4096,
      compat: { supportsDeveloperRole: false, supportsStore: false, maxTokensField: "max_tokens" },
    };
  });
  beforeEach(() => fake.reset());
  afterAll(() => fake.close());

  it("round-trips text and a tool call", async () => {
    const context = userContext("What time is it in Tokyo?");
    fake.enqueue(toolTurn("get_time", { timezone: "Asia/Tokyo" }, "Looking it up."));
    const first = await complete(model, context, { apiKey: "local-key" });
    expect(first.stopReason).toBe("toolUse");
    expect(textOf(first)).toBe("Looking it up.");
    expect(first.content[1]).toMatchObject({
      type: "toolCall",
      id: "call_1",
      name: "get_time",
      arguments: { timezone: "Asia/Tokyo" },
    });
    expect(first.usage.input).toBeGreaterThan(0);
    expect(first.usage.output).toBeGreaterThan(0);

    context.messages.push(first, toolResult(first, "20:00"));
    fake.enqueue(textTurn("It is 8 pm in Tokyo."));
    const second = await complete(model, context, { apiKey: "local-key" });
    expect(second.stopReason).toBe("stop");
    expect(textOf(second)).toBe("It is 8 pm in Tokyo.");

    const [firstRequest, secondRequest] = fake.requests;
    expect(firstRequest?.path).toBe("/v1/chat/completions");
    expect(firstRequest?.headers.authorization).toBe("Bearer local-key");
    expect(firstRequest?.body.messages[0]).toMatchObject({ role: "system" });
    expect(firstRequest?.lastUserText).toBe("What time is it in Tokyo?");
    expect(secondRequest?.lastUserText).toBe("20:00");
  });

  it("reports errors and lists its model", async () => {
    const reply = await complete(model, userContext("hi"), { apiKey: "local-key", maxRetries: 0 });
    expect(reply.stopReason).toBe("error");
    expect(reply.errorMessage).toContain("no scripted turn left");
    const models = (await (await fetch(`${fake.url}/v1/models`)).json()) as { data: unknown[] };
    expect(models.data).toEqual([expect.objectContaining({ id: FAKE_OPENAI_MODEL_ID })]);
  });
});

describe("the fakes' model listings, as the real APIs answer them", () => {
  const headers = { "x-api-key": API_KEY, "anthropic-version": "2023-06-01" };
  const getJson = async (url: string, init: RequestInit = { headers }) => {
    const response = await fetch(url, init);
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it("Anthropic: pages the list, resolves an alias, and refuses an unknown model or key", async () => {
    const fake = await startFakeAnthropic({ models: FAKE_ANTHROPIC_MODELS });
    try {
      const first = await getJson(`${fake.url}/v1/models?limit=2`);
      expect(first.body).toMatchObject({ has_more: true, first_id: FAKE_ANTHROPIC_MODELS[0] });
      const rest = await getJson(`${fake.url}/v1/models?limit=1000&after_id=${String(first.body.last_id)}`);
      expect((rest.body.data as unknown[]).length).toBe(FAKE_ANTHROPIC_MODELS.length - 2);
      expect(rest.body.has_more).toBe(false);
      const alias = await getJson(`${fake.url}/v1/models/claude-sonnet-4-5`);
      expect(alias.body).toMatchObject({ type: "model", id: "claude-sonnet-4-5-20250929" });
      const unknown = await getJson(`${fake.url}/v1/models/claude-sonet-4-5`);
      expect(unknown).toEqual({
        status: 404,
        body: { type: "error", error: { type: "not_found_error", message: "model: claude-sonet-4-5" } },
      });
      expect((await getJson(`${fake.url}/v1/models`, { headers: {} })).status).toBe(401);
      // A message for a model it does not have, through the real client: refused, nothing answered.
      fake.enqueue(textTurn("never sent"));
      const model = {
        ...getModel("anthropic", "claude-sonnet-4-5"),
        id: "claude-sonet-4-5",
        baseUrl: fake.url,
      };
      const reply = await complete(model, userContext("hi"), { apiKey: API_KEY, maxRetries: 0 });
      expect(reply.stopReason).toBe("error");
      expect(reply.errorMessage).toContain("model: claude-sonet-4-5");
      const refused = await complete({ ...model, id: "claude-sonnet-4-5" }, userContext("hi"), {
        apiKey: "sk-ant-invalid",
        maxRetries: 0,
      });
      expect(refused.errorMessage).toContain("invalid x-api-key");
    } finally {
      await fake.close();
    }
  });

  it("a server without a listing answers 404 there, and still answers messages", async () => {
    const anthropic = await startFakeAnthropic({ modelList: false });
    const openai = await startFakeOpenAI({ modelList: false });
    try {
      expect((await getJson(`${anthropic.url}/v1/models/claude-sonnet-4-5`)).status).toBe(404);
      expect((await getJson(`${anthropic.url}/v1/models`)).status).toBe(404);
      expect((await getJson(`${openai.url}/v1/models`)).status).toBe(404);
      anthropic.enqueue(textTurn("still here"));
      const model = { ...getModel("anthropic", "claude-sonnet-4-5"), id: "anything", baseUrl: anthropic.url };
      expect(textOf(await complete(model, userContext("hi"), { apiKey: API_KEY }))).toBe("still here");
    } finally {
      await anthropic.close();
      await openai.close();
    }
  });

  it("OpenAI: lists the models it was given and refuses a completion for another", async () => {
    const fake = await startFakeOpenAI({ models: ["llama3.1:8b", "qwen3:4b"] });
    try {
      const list = await getJson(`${fake.url}/v1/models`);
      expect((list.body.data as { id: string }[]).map((entry) => entry.id)).toEqual([
        "llama3.1:8b",
        "qwen3:4b",
      ]);
      const answer = await fetch(`${fake.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "llama3:8b", messages: [{ role: "user", content: "hi" }] }),
      });
      expect(answer.status).toBe(404);
      expect(await answer.json()).toMatchObject({ error: { code: "model_not_found" } });
    } finally {
      await fake.close();
    }
  });
});
