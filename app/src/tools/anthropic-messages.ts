import { ToolError } from "./result.js";

/**
 * A minimal non-streaming Anthropic Messages client for the tools that call a model of their own
 * (web_search, web_fetch). They need server tools and `pause_turn`, which pi-ai's agent-oriented
 * API does not expose, and nothing else, so a plain `fetch` is the smallest thing that works.
 */
export interface AnthropicCaller {
  apiKey: string;
  model: string;
  /** Without "/v1", e.g. "https://api.anthropic.com". */
  baseUrl: string;
  fetch: typeof fetch;
  /** Per request. */
  timeoutMs: number;
  /** Names the caller in error messages, e.g. "Web search". */
  what: string;
  /** Budget check before each request and usage record after it (the owner's usage page). */
  meter?: ModelCallMeter | undefined;
}

/** What a tool calling a model of its own reports, and asks, about spending. */
export interface ModelCallMeter {
  /** A reason not to make the call (a used-up budget), or undefined. */
  refuse(): string | undefined;
  record(model: string, usage: TokenUsage, searches: number): void;
}

export interface AnthropicReply {
  content: AnthropicBlock[];
  stopReason: string;
  usage: TokenUsage;
  /** `usage.server_tool_use.web_search_requests`: searches the provider ran (and bills). */
  searches: number;
}

/** One content block as the API sent it; kept whole so it can be sent back as-is. */
export type AnthropicBlock = { type: string } & Record<string, unknown>;

export interface TokenUsage {
  input: number;
  output: number;
}

export const DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com";
const API_VERSION = "2023-06-01";

/** POSTs one Messages request; every failure becomes a ToolError the model can read. */
export async function createMessage(
  caller: AnthropicCaller,
  body: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<AnthropicReply> {
  const refusal = caller.meter?.refuse();
  if (refusal) throw new ToolError(`${caller.what} is unavailable: ${refusal}`);
  const timeout = AbortSignal.timeout(caller.timeoutMs);
  const url = `${caller.baseUrl.replace(/\/+$/, "")}/v1/messages`;
  let response: Response;
  let text: string;
  try {
    response = await caller.fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-api-key": caller.apiKey,
        "anthropic-version": API_VERSION,
      },
      body: JSON.stringify({ model: caller.model, ...body }),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    text = await response.text();
  } catch (error) {
    if (signal?.aborted) throw error;
    if (timeout.aborted) {
      throw new ToolError(
        `${caller.what} failed: the model provider did not answer within ${caller.timeoutMs / 1000} s.`,
      );
    }
    throw new ToolError(`${caller.what} failed: could not reach the model provider (${messageOf(error)}).`);
  }
  if (!response.ok) throw new ToolError(`${caller.what} failed: ${describeError(response.status, text)}`);
  const reply = parseReply(caller.what, text);
  caller.meter?.record(caller.model, reply.usage, reply.searches);
  return reply;
}

/** Anthropic errors are `{type: "error", error: {type, message}}`; proxies may send anything. */
function describeError(status: number, text: string): string {
  const error = recordAt(parseJson(text), "error");
  const message = typeof error?.message === "string" ? error.message : text.trim().slice(0, 300);
  const type = typeof error?.type === "string" ? `${error.type}: ` : "";
  const hint =
    status === 529 || status === 429 || status >= 500
      ? " This is usually temporary: try again in a minute."
      : "";
  return `the model provider answered HTTP ${status} (${type}${message || "no details"}).${hint}`;
}

function parseReply(what: string, text: string): AnthropicReply {
  const body = parseJson(text);
  if (!isRecord(body) || !Array.isArray(body.content)) {
    throw new ToolError(`${what} failed: the model provider sent an answer that is not a Messages reply.`);
  }
  const usage = isRecord(body.usage) ? body.usage : {};
  const serverTools = recordAt(usage, "server_tool_use");
  return {
    content: body.content.filter(isRecord) as AnthropicBlock[],
    stopReason: typeof body.stop_reason === "string" ? body.stop_reason : "unknown",
    usage: {
      // Cached input is input too: budgets count what the request carried.
      input:
        count(usage.input_tokens) +
        count(usage.cache_creation_input_tokens) +
        count(usage.cache_read_input_tokens),
      output: count(usage.output_tokens),
    },
    searches: count(serverTools?.web_search_requests),
  };
}

/** Concatenates the text blocks of a reply (Anthropic splits cited text into many blocks). */
export function replyText(blocks: AnthropicBlock[]): string {
  return blocks
    .map((block) => (block.type === "text" && typeof block.text === "string" ? block.text : ""))
    .join("")
    .trim();
}

export function addUsage(total: TokenUsage, more: TokenUsage): TokenUsage {
  return { input: total.input + more.input, output: total.output + more.output };
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function recordAt(value: unknown, key: string): Record<string, unknown> | undefined {
  const inner = isRecord(value) ? value[key] : undefined;
  return isRecord(inner) ? inner : undefined;
}

export function messageOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.message}${cause}`;
}
