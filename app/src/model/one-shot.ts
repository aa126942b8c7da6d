/**
 * A non-streaming Anthropic Messages call for the tools that call a model of their own
 * (web_search, web_fetch). They need server tools and `pause_turn`, which pi-ai's agent-oriented
 * API does not expose, and nothing else. The request goes out on the model client's kept-alive
 * connections (`ModelClient.post`), like every other model call of the assistant.
 */

/** One JSON POST: the status and the body's text (`AnthropicWire.postJson`). */
export type JsonPost = (
  url: URL,
  headers: Record<string, string>,
  body: string,
  options: { timeoutMs: number; signal?: AbortSignal | undefined },
) => Promise<{ status: number; text: string }>;

/** A failed call, in words the model reads (its tool result). */
export class ModelCallError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelCallError";
  }
}

export interface AnthropicCaller {
  apiKey: string;
  model: string;
  /** Without "/v1", e.g. "https://api.anthropic.com". */
  baseUrl: string;
  post: JsonPost;
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

/** POSTs one Messages request; every failure becomes a ModelCallError the model can read. */
export async function createMessage(
  caller: AnthropicCaller,
  body: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<AnthropicReply> {
  const refusal = caller.meter?.refuse();
  if (refusal) throw new ModelCallError(`${caller.what} is unavailable: ${refusal}`);
  const url = new URL(`${caller.baseUrl.replace(/\/+$/, "")}/v1/messages`);
  let answer: { status: number; text: string };
  try {
    answer = await caller.post(
      url,
      { "content-type": "application/json", "x-api-key": caller.apiKey, "anthropic-version": API_VERSION },
      JSON.stringify({ model: caller.model, ...body }),
      { timeoutMs: caller.timeoutMs, signal },
    );
  } catch (error) {
    if (signal?.aborted) throw error;
    if (messageOf(error) === "Request timed out.") {
      throw new ModelCallError(
        `${caller.what} failed: the model provider did not answer within ${caller.timeoutMs / 1000} s.`,
      );
    }
    throw new ModelCallError(
      `${caller.what} failed: could not reach the model provider (${messageOf(error)}).`,
    );
  }
  const { status, text } = answer;
  if (status < 200 || status >= 300) {
    throw new ModelCallError(`${caller.what} failed: ${describeError(status, text)}`);
  }
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
    throw new ModelCallError(
      `${what} failed: the model provider sent an answer that is not a Messages reply.`,
    );
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
