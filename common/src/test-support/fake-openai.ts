import type { ServerResponse } from "node:http";
import {
  asArray,
  estimateTokens,
  flattenText,
  isRecord,
  outputTokens,
  pause,
  sendJson,
  splitPieces,
  startFakeLlmServer,
  stopReasonOf,
} from "./fake-llm.js";
import type { FakeBlock, FakeLlmServer, FakeProtocol, FakeTurn } from "./fake-llm.js";

/** The single model listed by `GET /v1/models` unless told otherwise. */
export const FAKE_OPENAI_MODEL_ID = "fake-model";

interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

interface Reply {
  meta: { id: string; created: number; model: unknown };
  blocks: FakeBlock[];
  toolCalls: ToolCall[];
  finishReason: "stop" | "tool_calls" | "length";
  usage: Record<string, unknown>;
}

type Delta = Record<string, unknown>;

const FINISH_REASONS = { end_turn: "stop", tool_use: "tool_calls", max_tokens: "length" } as const;

/**
 * Text of the last "user" message, or of the trailing run of "tool" messages when the
 * conversation ends with tool results.
 */
export function openAiLastUserText(body: unknown): string {
  const messages = (isRecord(body) ? asArray(body.messages) : []).filter(isRecord);
  const end = messages.findLastIndex((m) => m.role === "user" || m.role === "tool");
  const last = messages[end];
  if (!last) return "";
  if (last.role === "user") return flattenText(last.content);
  let start = end;
  while (start > 0 && messages[start - 1]?.role === "tool") start--;
  return messages
    .slice(start, end + 1)
    .map((m) => flattenText(m.content))
    .join("\n");
}

function toolCallsOf(turn: FakeTurn, nextId: () => string): ToolCall[] {
  return turn.content.flatMap((block): ToolCall[] =>
    block.type === "tool_use"
      ? [
          {
            id: block.id ?? nextId(),
            type: "function",
            function: { name: block.name, arguments: JSON.stringify(block.input) },
          },
        ]
      : [],
  );
}

function promptUsage(body: unknown, turn: FakeTurn): Record<string, unknown> {
  const prompt = isRecord(body) ? { messages: body.messages, tools: body.tools } : {};
  const promptTokens = estimateTokens(prompt);
  const completionTokens = outputTokens(turn);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: 0 },
  };
}

/** Streamed deltas for the turn's blocks, in content order. */
function contentDeltas(reply: Reply): Delta[] {
  const deltas: Delta[] = [{ role: "assistant", content: "" }];
  let toolIndex = 0;
  for (const block of reply.blocks) {
    if (block.type === "text") deltas.push(...splitPieces(block.text).map((content) => ({ content })));
    else if (block.type === "thinking") {
      deltas.push(...splitPieces(block.thinking).map((reasoning_content) => ({ reasoning_content })));
    } else {
      const index = toolIndex++;
      const call = reply.toolCalls[index];
      if (!call) continue;
      const head = {
        index,
        id: call.id,
        type: "function",
        function: { name: call.function.name, arguments: "" },
      };
      deltas.push({ tool_calls: [head] });
      for (const piece of splitPieces(call.function.arguments)) {
        deltas.push({ tool_calls: [{ index, function: { arguments: piece } }] });
      }
    }
  }
  return deltas;
}

async function writeStream(
  res: ServerResponse,
  reply: Reply,
  includeUsage: boolean,
  delayMs: number,
  signal: AbortSignal,
): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send = async (data: unknown): Promise<void> => {
    await pause(delayMs, signal);
    if (!signal.aborted) res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
  };
  const chunk = (delta: Delta, finish: string | null = null) => ({
    ...reply.meta,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  for (const delta of contentDeltas(reply)) await send(chunk(delta));
  await send(chunk({}, reply.finishReason));
  if (includeUsage) {
    await send({ ...reply.meta, object: "chat.completion.chunk", choices: [], usage: reply.usage });
  }
  await send("[DONE]");
  if (!signal.aborted) res.end();
}

function writeJson(res: ServerResponse, reply: Reply): void {
  const text = reply.blocks.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
  const reasoning = reply.blocks.flatMap((b) => (b.type === "thinking" ? [b.thinking] : [])).join("");
  const message = {
    role: "assistant",
    content: text || null,
    ...(reasoning ? { reasoning_content: reasoning } : {}),
    ...(reply.toolCalls.length > 0 ? { tool_calls: reply.toolCalls } : {}),
  };
  sendJson(res, 200, {
    ...reply.meta,
    object: "chat.completion",
    choices: [{ index: 0, message, finish_reason: reply.finishReason }],
    usage: reply.usage,
  });
}

function listModels(res: ServerResponse, models: readonly string[]): void {
  const data = models.map((id) => ({ id, object: "model", created: 0, owned_by: "fake" }));
  sendJson(res, 200, { object: "list", data });
}

export interface FakeOpenAiOptions {
  /**
   * The models `GET /v1/models` lists (default: `FAKE_OPENAI_MODEL_ID`). Given, a completion for
   * another model is refused as OpenAI refuses it (404 model_not_found); by default any is answered.
   */
  models?: readonly string[];
  /** false: no `GET /v1/models` (404), as some local servers and proxies have none. */
  modelList?: boolean;
}

function createOpenAiProtocol(options: FakeOpenAiOptions): FakeProtocol {
  let callIds = 0;
  let completionIds = 0;
  return {
    completionPath: "/v1/chat/completions",
    lastUserText: openAiLastUserText,
    refuse(_req, res, body) {
      const model = isRecord(body) ? String(body.model) : "";
      if (!options.models || options.models.includes(model)) return false;
      sendJson(res, 404, {
        error: {
          message: `The model \`${model}\` does not exist or you do not have access to it.`,
          type: "invalid_request_error",
          param: null,
          code: "model_not_found",
        },
      });
      return true;
    },
    async writeTurn(res, turn, body, signal) {
      const request = isRecord(body) ? body : {};
      const reply: Reply = {
        meta: {
          id: `chatcmpl-fake-${++completionIds}`,
          created: Math.floor(Date.now() / 1000),
          model: request.model,
        },
        blocks: turn.content,
        toolCalls: toolCallsOf(turn, () => `call_${++callIds}`),
        finishReason: FINISH_REASONS[stopReasonOf(turn)],
        usage: promptUsage(body, turn),
      };
      if (request.stream !== true) return writeJson(res, reply);
      const includeUsage = isRecord(request.stream_options) && request.stream_options.include_usage === true;
      await writeStream(res, reply, includeUsage, turn.chunkDelayMs ?? 0, signal);
    },
    handleOther(req, res) {
      const path = new URL(req.url ?? "/", "http://localhost").pathname;
      if (req.method !== "GET" || path !== "/v1/models" || options.modelList === false) return false;
      listModels(res, options.models ?? [FAKE_OPENAI_MODEL_ID]);
      return true;
    },
  };
}

/** A fake OpenAI Chat Completions API (`POST /v1/chat/completions`, `GET /v1/models`) on 127.0.0.1. */
export async function startFakeOpenAI(options: FakeOpenAiOptions = {}): Promise<FakeLlmServer> {
  return startFakeLlmServer(createOpenAiProtocol(options));
}
