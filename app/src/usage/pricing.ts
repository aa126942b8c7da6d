import { getModels, getProviders, type Api, type AssistantMessage, type Model } from "@mariozechner/pi-ai";
import type { TokenUsage } from "../model/one-shot.js";
import { closestModel } from "../model/template.js";
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

type Prices = Model<Api>["cost"];

/** A model's prices (US$ per million tokens) and, for one pi-ai does not list, whose they are. */
export interface PriceQuote {
  cost: Prices | undefined;
  /** The listed model priced in its stead (`closestModel`), when pi-ai does not list the id. */
  template?: string;
}

/** Prices by model id, for the calls pi-ai does not count (the web tools' own Messages calls). */
export type PriceList = (id: string) => PriceQuote;

/**
 * The assistant's own model as config.toml describes it (its `cost` included); other ids at pi-ai's
 * list price (Anthropic's first: the web tools speak its API), or at the closest Anthropic model's
 * when pi-ai does not list them; unpriced (0) when no model is of their family.
 */
export function createPriceList(assistantModel: Model<Api>): PriceList {
  const anthropic = getModels("anthropic") as Model<Api>[];
  const providers = (getProviders() as string[]).filter((p) => p !== "anthropic");
  const quotes = new Map<string, PriceQuote>();
  const quote = (id: string): PriceQuote => {
    if (id === assistantModel.id) return { cost: assistantModel.cost };
    for (const list of [anthropic, ...providers.map((p) => getModels(p as "anthropic") as Model<Api>[])]) {
      const found = list.find((m) => m.id === id);
      if (found) return { cost: found.cost };
    }
    const template = closestModel(id, anthropic);
    return template ? { cost: template.cost, template: template.id } : { cost: undefined };
  };
  return (id) => {
    let known = quotes.get(id);
    if (!known) quotes.set(id, (known = quote(id)));
    return known;
  };
}

/** What a web tool's own Messages call cost: its tokens at the model's price, plus searches. */
export function spendOfCall(cost: Prices | undefined, usage: TokenUsage, searches: number): Spend {
  const tokens = cost ? (usage.input * cost.input + usage.output * cost.output) / 1_000_000 : 0;
  return {
    inputTokens: usage.input,
    outputTokens: usage.output,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    costUsd: tokens + searches * WEB_SEARCH_USD,
  };
}
