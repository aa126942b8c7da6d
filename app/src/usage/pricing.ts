import { getModels, getProviders, type Api, type AssistantMessage, type Model } from "@mariozechner/pi-ai";
import type { TokenUsage } from "../tools/anthropic-messages.js";
import type { Spend } from "./meter.js";

/** Anthropic's price of one server-side web search (US$10 per 1,000). */
const WEB_SEARCH_USD = 0.01;

/** Tokens and cost as pi-ai reports them on an assistant message (cost from its model table). */
export function spendOfAssistant(message: AssistantMessage): Spend {
  const usage = message.usage;
  return {
    inputTokens: usage?.input ?? 0,
    outputTokens: usage?.output ?? 0,
    cacheReadTokens: usage?.cacheRead ?? 0,
    cacheWriteTokens: usage?.cacheWrite ?? 0,
    costUsd: usage?.cost?.total ?? 0,
  };
}

/** pi-ai's registry entry for a model id (Anthropic's first), for its prices. */
function findModel(id: string): Model<Api> | undefined {
  const providers = ["anthropic", ...(getProviders() as string[]).filter((p) => p !== "anthropic")];
  for (const provider of providers) {
    const found = (getModels(provider as Parameters<typeof getModels>[0]) as Model<Api>[]).find(
      (m) => m.id === id,
    );
    if (found) return found;
  }
  return undefined;
}

/** What a web tool's own Messages call cost: its tokens at the model's list price, plus searches. */
export function spendOfCall(model: string, usage: TokenUsage, searches: number): Spend {
  const cost = findModel(model)?.cost;
  const tokens = cost ? (usage.input * cost.input + usage.output * cost.output) / 1_000_000 : 0;
  return {
    inputTokens: usage.input,
    outputTokens: usage.output,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    costUsd: tokens + searches * WEB_SEARCH_USD,
  };
}
