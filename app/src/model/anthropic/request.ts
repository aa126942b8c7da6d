/**
 * One Messages API request: its address, headers and JSON body, chosen as pi-ai's Anthropic
 * provider chooses them for `streamSimple` with an API key (thinking, token limits, cache
 * breakpoints, beta headers), except that tools carry no `eager_input_streaming`: turns wait for a
 * whole tool call anyway, and the API's default streams validated arguments (see DECISIONLOG.md).
 */
import type { Api, Context, Model, SimpleStreamOptions, ThinkingLevel } from "@mariozechner/pi-ai";
import { withoutLoneSurrogates, type CacheControl, type MessageWire } from "./messages.js";

export const ANTHROPIC_VERSION = "2023-06-01";
const INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14";
const FINE_GRAINED_TOOL_STREAMING_BETA = "fine-grained-tool-streaming-2025-05-14";

export interface WireRequest {
  url: URL;
  headers: Record<string, string>;
  body: Buffer;
}

/** Models that decide for themselves how much to think (an effort instead of a budget). */
function thinksAdaptively(modelId: string): boolean {
  return /(opus|sonnet)-4[.-]6|opus-4[.-]7/.test(modelId);
}

function effortFor(model: Model<Api>, level: ThinkingLevel): string {
  const mapped = model.thinkingLevelMap?.[level];
  if (typeof mapped === "string") return mapped;
  if (level === "minimal" || level === "low") return "low";
  if (level === "medium") return "medium";
  return "high";
}

const THINKING_BUDGETS = { minimal: 1024, low: 2048, medium: 8192, high: 16384 };

/** Room for thinking on top of the answer's tokens, within what the model can write. */
function budgetFor(
  maxTokens: number,
  modelMaxTokens: number,
  level: ThinkingLevel,
  custom: SimpleStreamOptions["thinkingBudgets"],
): { maxTokens: number; budget: number } {
  const budgets = { ...THINKING_BUDGETS, ...custom };
  let budget = budgets[level === "xhigh" ? "high" : level];
  const total = Math.min(maxTokens + budget, modelMaxTokens);
  if (total <= budget) budget = Math.max(0, total - 1024);
  return { maxTokens: total, budget };
}

function cacheControlFor(
  model: Model<Api>,
  retention: SimpleStreamOptions["cacheRetention"],
): CacheControl | undefined {
  const chosen = retention ?? (process.env.PI_CACHE_RETENTION === "long" ? "long" : "short");
  if (chosen === "none") return undefined;
  const long =
    chosen === "long" && (model as Model<"anthropic-messages">).compat?.supportsLongCacheRetention !== false;
  return long ? { type: "ephemeral", ttl: "1h" } : { type: "ephemeral" };
}

/** `${baseUrl}/v1/messages`, joined as the Anthropic SDK joins them. */
export function messagesUrl(baseUrl: string): URL {
  return new URL(`${baseUrl.replace(/\/+$/, "")}/v1/messages`);
}

/** Header names in lower case; later sources win. */
function mergeHeaders(...sources: (Record<string, string> | undefined)[]): Record<string, string> {
  const merged: Record<string, string> = {};
  for (const source of sources) {
    for (const [name, value] of Object.entries(source ?? {})) merged[name.toLowerCase()] = value;
  }
  return merged;
}

export function buildRequest(
  model: Model<Api>,
  context: Context,
  options: SimpleStreamOptions & { apiKey: string },
  wire: MessageWire,
): WireRequest {
  const compat = (model as Model<"anthropic-messages">).compat;
  const cacheControl = cacheControlFor(model, options.cacheRetention);
  let maxTokens = options.maxTokens ?? (model.maxTokens > 0 ? Math.min(model.maxTokens, 32_000) : undefined);
  // Thinking: off, an effort (adaptive models) or a budget within the answer's tokens.
  let thinking: Record<string, unknown> | undefined = { type: "disabled" };
  let effort: string | undefined;
  if (options.reasoning && thinksAdaptively(model.id)) {
    thinking = { type: "adaptive", display: "summarized" };
    effort = effortFor(model, options.reasoning);
  } else if (options.reasoning) {
    const room = budgetFor(maxTokens ?? 0, model.maxTokens, options.reasoning, options.thinkingBudgets);
    maxTokens = room.maxTokens;
    thinking = { type: "enabled", budget_tokens: room.budget || 1024, display: "summarized" };
  }
  if (!model.reasoning) {
    thinking = undefined;
    effort = undefined;
  }
  const tools = context.tools ?? [];
  const rest: Record<string, unknown> = {
    max_tokens: maxTokens || (model.maxTokens / 3) | 0,
    stream: true,
  };
  if (context.systemPrompt) {
    rest.system = [
      {
        type: "text",
        text: withoutLoneSurrogates(context.systemPrompt),
        ...(cacheControl && { cache_control: cacheControl }),
      },
    ];
  }
  if (options.temperature !== undefined && !options.reasoning) rest.temperature = options.temperature;
  if (tools.length > 0) {
    rest.tools = tools.map((tool, index) => {
      const schema = tool.parameters as { properties?: unknown; required?: unknown };
      return {
        name: tool.name,
        description: tool.description,
        input_schema: {
          type: "object",
          properties: schema.properties ?? {},
          required: schema.required ?? [],
        },
        ...(cacheControl && index === tools.length - 1 && { cache_control: cacheControl }),
      };
    });
  }
  if (thinking) rest.thinking = thinking;
  if (effort) rest.output_config = { effort };
  if (typeof options.metadata?.user_id === "string") rest.metadata = { user_id: options.metadata.user_id };

  const messages = wire.messagesJson(context.messages, model, cacheControl);
  const body = Buffer.concat([
    Buffer.from(`{"model":${JSON.stringify(model.id)},"messages":`),
    messages,
    Buffer.from(`,${JSON.stringify(rest).slice(1)}`),
  ]);

  const betas: string[] = [];
  if (tools.length > 0 && compat?.supportsEagerToolInputStreaming === false)
    betas.push(FINE_GRAINED_TOOL_STREAMING_BETA);
  if (!thinksAdaptively(model.id)) betas.push(INTERLEAVED_THINKING_BETA);
  const headers = mergeHeaders(
    {
      accept: "application/json",
      "anthropic-version": ANTHROPIC_VERSION,
      "x-api-key": options.apiKey,
      ...(betas.length > 0 && { "anthropic-beta": betas.join(",") }),
    },
    model.headers,
    options.headers,
    { "content-type": "application/json" },
  );
  return { url: messagesUrl(model.baseUrl), headers, body };
}
