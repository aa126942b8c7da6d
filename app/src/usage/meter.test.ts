import { describe, expect, it } from "vitest";
import type { Queryable } from "../db/database.js";
import { UsageMeter, dayAndMonth, pluginOfSource, startOfNextDay, startOfNextMonth } from "./meter.js";

/** The meter only reads sums from the table and inserts rows; this stands in for both (one month). */
function memoryTable(today: () => string): Queryable {
  const rows: { day: string; cost: number }[] = [];
  return {
    async query<R>(sql: string, params: unknown[] = []) {
      if (sql.startsWith("INSERT")) {
        for (let i = 9; i < params.length; i += 10) rows.push({ day: today(), cost: Number(params[i]) });
      }
      const sum = (list: typeof rows) => list.reduce((total, row) => total + row.cost, 0);
      return {
        rows: [{ today: sum(rows.filter((row) => row.day === today())), month: sum(rows) }] as R[],
        rowCount: 0,
      };
    },
  };
}

describe("days and months in the owner's time zone", () => {
  it("starts the next day and month at local midnight, across a daylight-saving change", () => {
    // 30 March 2025, 23:30 in Berlin is 21:30 UTC; the clocks went forward that morning.
    const now = new Date("2025-03-30T21:30:00Z");
    expect(dayAndMonth(now, "Europe/Berlin")).toEqual({ day: "2025-03-30", month: "2025-03" });
    expect(startOfNextDay(now, "Europe/Berlin").toISOString()).toBe("2025-03-30T22:00:00.000Z");
    expect(startOfNextMonth(now, "Europe/Berlin").toISOString()).toBe("2025-03-31T22:00:00.000Z");
    expect(startOfNextDay(new Date("2025-12-31T23:59:00Z"), "UTC").toISOString()).toBe(
      "2026-01-01T00:00:00.000Z",
    );
  });

  it("names the plugin of a plugin's result", () => {
    expect(pluginOfSource("plugin:weather/forecast")).toBe("weather");
    expect(pluginOfSource("plugin:weather/init")).toBe("weather");
    expect(pluginOfSource("cli")).toBeNull();
    expect(pluginOfSource(null)).toBeNull();
  });
});

describe("UsageMeter", () => {
  it("refuses once a budget is reached, the monthly one first, and starts a new day from zero", async () => {
    let now = new Date("2026-05-10T12:00:00Z");
    const table = memoryTable(() => dayAndMonth(now, "UTC").day);
    const meter = new UsageMeter(table, { daily: 1, monthly: 3 }, "UTC", () => now);
    await meter.start();
    const spend = async (costUsd: number) => {
      meter.record({
        kind: "turn",
        model: "m",
        inputTokens: 1,
        outputTokens: 1,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        costUsd,
      });
      await meter.flush();
    };
    expect(meter.refusal()).toBeUndefined();
    await spend(0.6);
    expect(meter.refusal()).toBeUndefined();
    await spend(0.5);
    const daily = meter.refusal();
    expect(daily).toMatchObject({ period: "daily", limitUsd: 1, resetsAt: new Date("2026-05-11T00:00:00Z") });
    expect(daily?.message).toContain("The daily budget of $1.00 is used up ($1.10 spent)");
    // The next day starts from zero; the month goes on counting.
    now = new Date("2026-05-11T08:00:00Z");
    expect(meter.refusal()).toBeUndefined();
    expect(meter.spent()).toEqual({ daily: 0, monthly: expect.closeTo(1.1, 6) });
    await spend(2);
    expect(meter.spent().monthly).toBeCloseTo(3.1, 6);
    expect(meter.refusal()).toMatchObject({ period: "monthly", resetsAt: new Date("2026-06-01T00:00:00Z") });
  });
});

describe("UsageMeter rows riding another write", () => {
  it("hands its rows to the write that carries them and keeps them when that write fails", async () => {
    const inserted: unknown[][] = [];
    const table: Queryable = {
      async query<R>(sql: string, params: unknown[] = []) {
        if (sql.startsWith("INSERT")) inserted.push(params);
        return { rows: [{ today: 0, month: 0 }] as R[], rowCount: 0 };
      },
    };
    const meter = new UsageMeter(table, {}, "UTC");
    await meter.start();
    const call = { kind: "turn" as const, model: "m", inputTokens: 5, outputTokens: 2 };
    meter.record({ ...call, cacheReadTokens: 0, cacheWriteTokens: 0, costUsd: 0.25 });
    // Numbered after the carrying statement's own parameters.
    const failing = meter.writeWith(async (parts) => {
      expect(parts).toHaveLength(1);
      expect(parts[0]?.sql(3)).toMatch(/VALUES \(\$3, \$4, .*, \$12\)$/);
      throw new Error("the database went away");
    });
    await expect(failing).rejects.toThrow("the database went away");
    await meter.flush();
    expect(inserted).toEqual([["turn", null, null, null, "m", 5, 2, 0, 0, 0.25]]);
    await meter.flush();
    expect(inserted).toHaveLength(1);
    expect(await meter.writeWith(async (parts) => parts.length)).toBe(0);
  });

  it("keeps the cost of calls for an entry never saved, without the link, even after a failed write", async () => {
    const inserted: unknown[][] = [];
    let fail = true;
    const table: Queryable = {
      async query<R>(sql: string, params: unknown[] = []) {
        if (sql.startsWith("INSERT")) {
          if (fail) throw new Error('violates foreign key constraint "usage_inbox_id_fkey"');
          inserted.push(params);
        }
        return { rows: [{ today: 0, month: 0 }] as R[], rowCount: 0 };
      },
    };
    const meter = new UsageMeter(table, {}, "UTC");
    await meter.start();
    const call = { kind: "turn" as const, model: "m", inputTokens: 5, outputTokens: 2, cacheReadTokens: 0 };
    meter.record({ ...call, cacheWriteTokens: 0, costUsd: 0.25, inboxId: 7 });
    await expect(meter.flush()).rejects.toThrow("usage_inbox_id_fkey");
    meter.unlink(7);
    meter.record({ ...call, cacheWriteTokens: 0, costUsd: 0.5, inboxId: 8 });
    fail = false;
    await meter.flush();
    expect(inserted).toEqual([
      ["turn", null, null, null, "m", 5, 2, 0, 0, 0.25, "turn", null, null, 8, "m", 5, 2, 0, 0, 0.5],
    ]);
    expect(meter.spent().daily).toBe(0.75);
  });
});
