import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  asArray,
  flattenText,
  isRecord,
  outputTokens,
  pause,
  sendJson,
  splitPieces,
  startFakeLlmServer,
  stopReasonOf,
  tokensForChars,
} from "./fake-llm.js";
import type { FakeLlmServer, FakeProtocol, FakeTurn } from "./fake-llm.js";

/** Anthropic looks for earlier cache entries up to about 20 blocks before each breakpoint. */
const CACHE_LOOKBACK_BLOCKS = 20;
/** Tokens that start the assistant turn; never cached (real responses also show a few uncached tokens). */
const TURN_OVERHEAD_TOKENS = 3;

export interface AnthropicInputUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

type AnthropicBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

type SseEvent = { type: string } & Record<string, unknown>;
type Send = (event: SseEvent) => Promise<void>;

interface Segment {
  json: string;
  breakpoint: boolean;
}

function segment(block: unknown, role: string): Segment {
  if (!isRecord(block) || !("cache_control" in block))
    return { json: `${role} ${JSON.stringify(block)}`, breakpoint: false };
  // The marker itself is not part of the cached content: the same block must match with or without it.
  const { cache_control: marker, ...rest } = block;
  return { json: `${role} ${JSON.stringify(rest)}`, breakpoint: marker != null };
}

function blocksOf(content: unknown): unknown[] {
  return typeof content === "string" ? [{ type: "text", text: content }] : asArray(content);
}

/** The request in the order the API caches it: tools, then system, then message content blocks. */
function segmentsOf(body: unknown): Segment[] {
  if (!isRecord(body)) return [];
  const segments = asArray(body.tools).map((tool) => segment(tool, "tool"));
  segments.push(...blocksOf(body.system).map((block) => segment(block, "system")));
  for (const message of asArray(body.messages)) {
    if (!isRecord(message)) continue;
    const role = String(message.role);
    segments.push(...blocksOf(message.content).map((block) => segment(block, role)));
  }
  return segments;
}

/**
 * Deterministic emulation of Anthropic prompt caching. Each block with `cache_control` is a
 * breakpoint; the prefix up to it is written to the cache. A later request reads the longest
 * cached prefix that ends at one of its breakpoints or at most 20 blocks before one.
 */
export class AnthropicPromptCache {
  private readonly prefixes = new Map<string, number>();

  usage(body: unknown): AnthropicInputUsage {
    const segments = segmentsOf(body);
    const breakpoints = segments.flatMap((s, i) => (s.breakpoint ? [i] : []));
    // Only prefixes ending at a breakpoint or within the look-back before one are ever looked up
    // or written; digesting just those keeps a long conversation's request cheap to answer.
    const wanted = new Set<number>();
    for (const breakpoint of breakpoints)
      for (let i = Math.max(0, breakpoint - CACHE_LOOKBACK_BLOCKS + 1); i <= breakpoint; i++) wanted.add(i);
    const hash = createHash("sha256").update(isRecord(body) ? String(body.model) : "");
    const keys = new Map<number, string>();
    const tokens: number[] = [];
    let chars = 0;
    let pending = "";
    for (const [i, { json }] of segments.entries()) {
      pending += `${json}\n`;
      chars += json.length;
      if (wanted.has(i)) {
        hash.update(pending);
        pending = "";
        keys.set(i, hash.copy().digest("hex"));
      }
      tokens.push(tokensForChars(chars));
    }
    const readEnd = this.longestCached(keys, breakpoints);
    const read = readEnd < 0 ? 0 : (this.prefixes.get(keys.get(readEnd) ?? "") ?? 0);
    const writeEnd = Math.max(breakpoints.at(-1) ?? -1, readEnd);
    const upToWrite = writeEnd < 0 ? 0 : (tokens[writeEnd] ?? 0);
    for (const i of breakpoints) this.prefixes.set(keys.get(i) ?? "", tokens[i] ?? 0);
    return {
      input_tokens: (tokens.at(-1) ?? 0) - upToWrite + TURN_OVERHEAD_TOKENS,
      cache_creation_input_tokens: Math.max(0, upToWrite - read),
      cache_read_input_tokens: read,
    };
  }

  clear(): void {
    this.prefixes.clear();
  }

  private longestCached(keys: Map<number, string>, breakpoints: number[]): number {
    let best = -1;
    for (const breakpoint of breakpoints) {
      const stop = Math.max(best + 1, breakpoint - CACHE_LOOKBACK_BLOCKS + 1, 0);
      for (let i = breakpoint; i >= stop; i--) {
        if (this.prefixes.has(keys.get(i) ?? "")) {
          best = i;
          break;
        }
      }
    }
    return best;
  }
}

function userBlockText(block: unknown): string {
  if (!isRecord(block)) return "";
  if (block.type === "text" && typeof block.text === "string") return block.text;
  if (block.type === "tool_result") return flattenText(block.content);
  return "";
}

/** Text blocks and tool_result contents of the last user message. */
export function anthropicLastUserText(body: unknown): string {
  const messages = isRecord(body) ? asArray(body.messages) : [];
  const last = messages.findLast((message) => isRecord(message) && message.role === "user");
  if (!isRecord(last)) return "";
  if (typeof last.content === "string") return last.content;
  return asArray(last.content).map(userBlockText).filter(Boolean).join("\n");
}

function toAnthropicBlocks(turn: FakeTurn, nextToolId: () => string): AnthropicBlock[] {
  return turn.content.map((block): AnthropicBlock => {
    if (block.type === "text") return { type: "text", text: block.text };
    if (block.type === "thinking") {
      const signature = createHash("sha256").update(block.thinking).digest("base64");
      return { type: "thinking", thinking: block.thinking, signature };
    }
    return { type: "tool_use", id: block.id ?? nextToolId(), name: block.name, input: block.input };
  });
}

function blockStart(block: AnthropicBlock): AnthropicBlock {
  if (block.type === "text") return { type: "text", text: "" };
  if (block.type === "thinking") return { type: "thinking", thinking: "", signature: "" };
  return { ...block, input: {} };
}

function blockDeltas(block: AnthropicBlock): Record<string, unknown>[] {
  if (block.type === "text") return splitPieces(block.text).map((text) => ({ type: "text_delta", text }));
  if (block.type === "thinking") {
    const thinking = splitPieces(block.thinking).map((piece) => ({
      type: "thinking_delta",
      thinking: piece,
    }));
    return [...thinking, { type: "signature_delta", signature: block.signature }];
  }
  const json = JSON.stringify(block.input);
  return splitPieces(json).map((partial_json) => ({ type: "input_json_delta", partial_json }));
}

async function sendBlock(send: Send, index: number, block: AnthropicBlock): Promise<void> {
  await send({ type: "content_block_start", index, content_block: blockStart(block) });
  for (const delta of blockDeltas(block)) await send({ type: "content_block_delta", index, delta });
  await send({ type: "content_block_stop", index });
}

interface Reply {
  message: { id: string; type: "message"; role: "assistant"; model: unknown };
  blocks: AnthropicBlock[];
  stopReason: string;
  usage: AnthropicInputUsage;
  output: number;
}

async function writeStream(res: ServerResponse, reply: Reply, delayMs: number, signal: AbortSignal) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const send: Send = async (event) => {
    await pause(delayMs, signal);
    if (!signal.aborted) res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
  };
  const start = { ...reply.message, content: [], stop_reason: null, stop_sequence: null };
  await send({ type: "message_start", message: { ...start, usage: { ...reply.usage, output_tokens: 1 } } });
  for (const [index, block] of reply.blocks.entries()) await sendBlock(send, index, block);
  const delta = { stop_reason: reply.stopReason, stop_sequence: null };
  await send({ type: "message_delta", delta, usage: { output_tokens: reply.output } });
  await send({ type: "message_stop" });
  if (!signal.aborted) res.end();
}

function writeJson(res: ServerResponse, reply: Reply): void {
  sendJson(res, 200, {
    ...reply.message,
    content: reply.blocks,
    stop_reason: reply.stopReason,
    stop_sequence: null,
    usage: { ...reply.usage, output_tokens: reply.output },
  });
}

/** What the fake lists by default: ids as Anthropic lists them (dated snapshots, newer ones bare). */
export const FAKE_ANTHROPIC_MODELS = [
  "claude-opus-4-7",
  "claude-sonnet-4-6",
  "claude-haiku-4-5-20251001",
  "claude-sonnet-4-5-20250929",
  "claude-opus-4-1-20250805",
  "claude-sonnet-4-20250514",
  "claude-3-5-haiku-20241022",
] as const;

export interface FakeAnthropicOptions {
  /**
   * Emulate prompt caching (default): usage reports cache reads and writes as the API would.
   * Off, every input token is reported uncached, and a long request costs the fake nothing beyond
   * reading it (the turn benchmark, where the fake's own time would count as the product's).
   */
  promptCache?: boolean;
  /**
   * The models it has (default `FAKE_ANTHROPIC_MODELS`), each also by its alias without the date.
   * Given, a message for another model is refused as the API refuses it (404 not_found_error);
   * by default any model is answered.
   */
  models?: readonly string[];
  /**
   * false: no `GET /v1/models` routes at all (404 with a proxy's plain body), as some proxies and
   * local servers speaking the Messages API have none.
   */
  modelList?: boolean;
}

function uncachedUsage(res: ServerResponse): AnthropicInputUsage {
  const bytes = Number(res.req.headers["content-length"] ?? 0);
  return { input_tokens: tokensForChars(bytes), cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
}

const withoutDate = (id: string): string => id.replace(/-\d{8}$/, "");

function modelInfo(id: string): Record<string, unknown> {
  const date = /-(\d{4})(\d{2})(\d{2})$/.exec(id);
  return {
    type: "model",
    id,
    display_name: id,
    created_at: date ? `${date[1]}-${date[2]}-${date[3]}T00:00:00Z` : "2026-01-01T00:00:00Z",
  };
}

/** A missing key, or one containing "invalid" (a key Anthropic does not know), refused as the API does. */
function refusedKey(req: IncomingMessage, res: ServerResponse): boolean {
  const key = req.headers["x-api-key"];
  if (typeof key === "string" && !key.includes("invalid")) return false;
  sendJson(res, 401, {
    type: "error",
    error: { type: "authentication_error", message: "invalid x-api-key" },
  });
  return true;
}

function notFoundModel(res: ServerResponse, id: string): void {
  sendJson(res, 404, { type: "error", error: { type: "not_found_error", message: `model: ${id}` } });
}

/** `GET /v1/models` (paged by `limit` and `after_id`) and `GET /v1/models/{id}` (ids and aliases). */
function answerModels(req: IncomingMessage, res: ServerResponse, models: readonly string[]): boolean {
  const url = new URL(req.url ?? "/", "http://localhost");
  if (req.method !== "GET" || !url.pathname.startsWith("/v1/models")) return false;
  if (refusedKey(req, res)) return true;
  if (url.pathname === "/v1/models") {
    const limit = Math.min(1000, Math.max(1, Number(url.searchParams.get("limit") ?? 20)));
    const after = url.searchParams.get("after_id");
    const start = after ? models.indexOf(after) + 1 : 0;
    const page = models.slice(start, start + limit).map(modelInfo);
    sendJson(res, 200, {
      data: page,
      has_more: start + limit < models.length,
      first_id: page[0]?.id ?? null,
      last_id: page.at(-1)?.id ?? null,
    });
    return true;
  }
  const id = decodeURIComponent(url.pathname.slice("/v1/models/".length));
  const found = models.find((model) => model === id || withoutDate(model) === id);
  if (found) sendJson(res, 200, modelInfo(found));
  else notFoundModel(res, id);
  return true;
}

function createAnthropicProtocol(options: FakeAnthropicOptions): FakeProtocol {
  const cache = new AnthropicPromptCache();
  const promptCache = options.promptCache ?? true;
  const models = options.models ?? FAKE_ANTHROPIC_MODELS;
  let toolIds = 0;
  let messageIds = 0;
  return {
    completionPath: "/v1/messages",
    lastUserText: anthropicLastUserText,
    refuse(req, res, body) {
      if (refusedKeyOnMessages(req, res)) return true;
      const model = isRecord(body) ? String(body.model) : "";
      if (!options.models || options.models.some((id) => id === model || withoutDate(id) === model))
        return false;
      notFoundModel(res, model);
      return true;
    },
    async writeTurn(res, turn, body, signal) {
      const reply: Reply = {
        message: {
          id: `msg_fake_${++messageIds}`,
          type: "message",
          role: "assistant",
          model: isRecord(body) ? body.model : undefined,
        },
        blocks: toAnthropicBlocks(turn, () => `toolu_${++toolIds}`),
        stopReason: stopReasonOf(turn),
        usage: promptCache ? cache.usage(body) : uncachedUsage(res),
        output: outputTokens(turn),
      };
      if (isRecord(body) && body.stream === true)
        await writeStream(res, reply, turn.chunkDelayMs ?? 0, signal);
      else writeJson(res, reply);
    },
    reset: () => cache.clear(),
    handleOther(req, res) {
      if (options.modelList === false) return false;
      return answerModels(req, res, models);
    },
  };
}

/**
 * A key containing "invalid" is refused on messages too (401), as the API refuses a key it does
 * not know; a missing key is let through (the tests' local servers are asked without one).
 */
function refusedKeyOnMessages(req: IncomingMessage, res: ServerResponse): boolean {
  const key = req.headers["x-api-key"];
  return typeof key === "string" && key.includes("invalid") && refusedKey(req, res);
}

/**
 * A fake Anthropic Messages API (`POST /v1/messages`, streaming or not; `GET /v1/models` and
 * `GET /v1/models/{id}`) on 127.0.0.1.
 */
export async function startFakeAnthropic(options: FakeAnthropicOptions = {}): Promise<FakeLlmServer> {
  return startFakeLlmServer(createAnthropicProtocol(options));
}
