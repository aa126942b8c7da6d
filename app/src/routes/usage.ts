import type { Router } from "@stavrobot/common";
import type { Queryable } from "../db/database.js";
import { dayAndMonth, type UsageMeter } from "../usage/meter.js";

export interface UsageRouteDeps {
  db: Queryable;
  meter: UsageMeter;
  timezone: string;
  /** The assistant's model and its prices (US$ per million tokens), as the meter counts them. */
  model?: { id: string; cost: Readonly<Record<"input" | "output" | "cacheRead" | "cacheWrite", number>> };
}

interface Totals {
  turns: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

const TOTALS = `count(DISTINCT inbox_id)::int AS turns,
  coalesce(sum(input_tokens), 0)::bigint AS "inputTokens",
  coalesce(sum(output_tokens), 0)::bigint AS "outputTokens",
  coalesce(sum(cache_read_tokens), 0)::bigint AS "cacheReadTokens",
  coalesce(sum(cache_write_tokens), 0)::bigint AS "cacheWriteTokens",
  coalesce(sum(cost_usd), 0)::float8 AS "costUsd"`;

const DAYS = 30;

function numbers<T extends Totals>(row: T): T {
  return {
    ...row,
    turns: Number(row.turns),
    inputTokens: Number(row.inputTokens),
    outputTokens: Number(row.outputTokens),
    cacheReadTokens: Number(row.cacheReadTokens),
    cacheWriteTokens: Number(row.cacheWriteTokens),
    costUsd: Number(row.costUsd),
  };
}

/**
 * `GET /api/usage` (owner's password): tokens and cost per day (the last 30, the owner's time
 * zone), per source, per plugin and per turn, how much of each budget is spent, and whether the
 * assistant's model has a price at all (`model: {id, priced}`).
 */
export function addUsageRoutes(router: Router, deps: UsageRouteDeps): void {
  router.get("/api/usage", async () => {
    const { db, meter, timezone } = deps;
    await meter.flush();
    const since = `now() - interval '${DAYS} days'`;
    const [days, bySource, byPlugin, turns] = await Promise.all([
      db.query<Totals & { day: string }>(
        `SELECT to_char(at AT TIME ZONE $1, 'YYYY-MM-DD') AS day, ${TOTALS}
         FROM usage WHERE at >= ${since} GROUP BY 1`,
        [timezone],
      ),
      db.query<Totals & { source: string }>(
        `SELECT coalesce(source, kind) AS source, ${TOTALS} FROM usage WHERE at >= ${since}
         GROUP BY 1 ORDER BY "costUsd" DESC, source`,
      ),
      db.query<Totals & { plugin: string }>(
        `SELECT plugin, ${TOTALS} FROM usage WHERE at >= ${since} AND plugin IS NOT NULL
         GROUP BY 1 ORDER BY "costUsd" DESC, plugin`,
      ),
      db.query<
        Totals & { inboxId: number; at: Date; source: string | null; plugin: string | null; calls: number }
      >(
        `SELECT inbox_id AS "inboxId", min(at) AS at, max(source) AS source, max(plugin) AS plugin,
                count(*)::int AS calls, ${TOTALS}
         FROM usage WHERE inbox_id IS NOT NULL GROUP BY inbox_id ORDER BY inbox_id DESC LIMIT 50`,
      ),
    ]);
    const byDay = new Map(days.rows.map((row) => [row.day, numbers(row)]));
    const now = Date.now();
    const series = [];
    for (let i = DAYS - 1; i >= 0; i--) {
      const day = dayAndMonth(new Date(now - i * 86_400_000), timezone).day;
      const totals = byDay.get(day);
      series.push(
        totals ?? {
          day,
          turns: 0,
          inputTokens: 0,
          outputTokens: 0,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          costUsd: 0,
        },
      );
    }
    const spent = meter.spent();
    const prices = deps.model?.cost;
    return {
      json: {
        // Unpriced (a model pi-ai does not list, at a custom endpoint, without `cost`): its calls
        // count as $0 and no budget stops them; the page says so rather than let $0 look measured.
        model: deps.model
          ? { id: deps.model.id, priced: Object.values(prices ?? {}).some((price) => price > 0) }
          : null,
        budgets: {
          daily: { limitUsd: meter.limits.daily ?? null, spentUsd: spent.daily },
          monthly: { limitUsd: meter.limits.monthly ?? null, spentUsd: spent.monthly },
        },
        days: series,
        bySource: bySource.rows.map(numbers),
        byPlugin: byPlugin.rows.map(numbers),
        turns: turns.rows.map((row) => ({
          ...numbers(row),
          at: new Date(row.at).toISOString(),
          calls: Number(row.calls),
        })),
      },
    };
  });
}
