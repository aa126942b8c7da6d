import type { Api, AssistantMessage, Model } from "@mariozechner/pi-ai";
import { errorMessage, type Logger } from "@stavrobot/common";
import type { AppConfig } from "../boot/config.js";
import type { Database } from "../db/database.js";
import type { ModelCallMeter } from "../model/one-shot.js";
import type { CurrentTurn } from "../queue/current-turn.js";
import { UsageMeter, type UsageKind, type UsageRecord } from "./meter.js";
import { createPriceList, spendOfAssistant, spendOfCall } from "./pricing.js";

/** The usage wing: what model calls cost, and the budgets that stop them. */
export interface UsageWing {
  meter: UsageMeter;
  /** A reason not to make a model call now (a used-up budget), or undefined. */
  refuseModelCall: () => string | undefined;
  /** Writes what was counted since the last flush (logged, never thrown). */
  flush: () => Promise<void>;
  /** Counts a turn's model call. */
  recordTurnCall: (inboxId: number, message: AssistantMessage) => void;
  /** Counts a compaction's model call. */
  recordCompaction: (message: AssistantMessage) => void;
  /** Budget checks and usage records for a tool that calls a model of its own. */
  toolMeter: (kind: Extract<UsageKind, "web_search" | "web_fetch">) => ModelCallMeter;
}

/**
 * The meter (its rows are accounting: losing the last few to a server crash is acceptable, so
 * they go through the relaxed pool), priced as the configured model is, each call counted under
 * the turn it belongs to (`currentTurn`).
 */
export async function wireUsage(options: {
  db: Database;
  config: Readonly<AppConfig>;
  timezone: string;
  model: Model<Api>;
  currentTurn: CurrentTurn;
  logger: Logger;
}): Promise<UsageWing> {
  const { db, config, timezone, model, currentTurn, logger } = options;
  const meter = new UsageMeter(db.relaxed, config.budget ?? {}, timezone);
  await meter.start();
  const record = (entry: UsageRecord): void => {
    if (entry.inputTokens + entry.outputTokens + entry.cacheReadTokens + entry.cacheWriteTokens === 0) return;
    meter.record(entry);
  };
  const prices = createPriceList(model);
  for (const helperModel of new Set([config.webSearch?.model, config.webFetch?.model])) {
    const template = helperModel && prices(helperModel).template;
    if (template)
      logger.info(`pi-ai does not list model "${helperModel}": web tools price it as "${template}"`);
  }
  const refuseModelCall = (): string | undefined => meter.refusal()?.message;
  return {
    meter,
    refuseModelCall,
    flush: () =>
      meter
        .flush()
        .catch((error: unknown) => logger.warn("could not record usage", { error: errorMessage(error) })),
    recordTurnCall: (inboxId, message) =>
      record({
        kind: "turn",
        model: message.model,
        source: currentTurn.entry?.source,
        inboxId,
        ...spendOfAssistant(message),
      }),
    recordCompaction: (message) =>
      record({ kind: "compaction", model: message.model, ...spendOfAssistant(message) }),
    toolMeter: (kind) => ({
      refuse: refuseModelCall,
      record: (modelId, usage, searches) =>
        record({
          kind,
          model: modelId,
          source: currentTurn.entry?.source,
          inboxId: currentTurn.entry?.id,
          ...spendOfCall(prices(modelId).cost, usage, searches),
        }),
    }),
  };
}
