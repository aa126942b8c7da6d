import { describe, expect, it, vi } from "vitest";
import { textTurn } from "@stavrobot/common/test-support";
import { useTestApp } from "./helpers/app.js";
import { raw } from "./helpers/http.js";

/**
 * The Schedule page's API against the real app: the two nightly maintenance entries seeded by the
 * migrations, a firing's result and cost found by its source (`cron:<id>`), and every refusal.
 */
interface Entry {
  id: number;
  name: string | null;
  cronExpression: string | null;
  fireAt: string | null;
  note: string;
  nextFire: string | null;
  lastResult: { inboxId: number; status: string; outcome: string | null; text: string | null } | null;
  cost: { turns: number; costUsd: number; lastCostUsd: number | null };
}

const t = useTestApp();

async function schedule(): Promise<{ timezone: string; costDays: number; entries: Entry[] }> {
  const response = await raw(t.app.port, "GET", "/api/schedule");
  expect(response.status).toBe(200);
  return response.json;
}

const send = (method: string, path: string, body?: unknown) =>
  raw(t.app.port, method, path, {
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

const byName = async (name: string): Promise<Entry> => {
  const entry = (await schedule()).entries.find((one) => one.name === name);
  if (!entry) throw new Error(`no entry named ${name}`);
  return entry;
};

describe("the schedule API", () => {
  it("lists the two nightly maintenance turns with their next firing, not fired yet and free so far", async () => {
    const { timezone, costDays, entries } = await schedule();
    expect(timezone).toBe("UTC");
    expect(costDays).toBe(30);
    expect(entries.map((entry) => [entry.name, entry.cronExpression])).toEqual([
      ["nightly-review", "0 3 * * *"],
      ["daily-maintenance", "0 4 * * *"],
    ]);
    for (const entry of entries) {
      const next = new Date(entry.nextFire ?? "");
      expect(next.getTime()).toBeGreaterThan(Date.now());
      expect(next.getTime() - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
      expect(next.getUTCHours()).toBe(entry.name === "nightly-review" ? 3 : 4);
      expect(entry.lastResult).toBeNull();
      expect(entry.cost).toEqual({ turns: 0, costUsd: 0, lastCostUsd: null });
    }
  });

  it("is the owner's only", async () => {
    expect((await raw(t.app.port, "GET", "/api/schedule", { auth: null })).status).toBe(401);
    const review = await byName("nightly-review");
    const put = await raw(t.app.port, "PUT", `/api/schedule/${review.id}`, {
      auth: null,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ note: "changed by a stranger" }),
    });
    expect(put.status).toBe(401);
    expect((await raw(t.app.port, "DELETE", `/api/schedule/${review.id}`, { auth: null })).status).toBe(401);
    expect((await byName("nightly-review")).note).toBe(review.note);
  });

  it("shows a firing's result and what it cost, found by the entry's source", async () => {
    const review = await byName("nightly-review");
    // A time a few seconds ahead, as a six-field (seconds first) expression: it fires once today.
    const at = new Date(Date.now() + 6_000);
    const expression = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`;
    t.fake.enqueue(textTurn("Memories merged; nothing needs you."));
    const changed = await send("PUT", `/api/schedule/${review.id}`, { cronExpression: expression });
    expect(changed.status).toBe(200);
    expect(changed.json.entries.find((entry: Entry) => entry.id === review.id)).toMatchObject({
      cronExpression: expression,
      nextFire: new Date(Math.floor(at.getTime() / 1000) * 1000).toISOString(),
    });
    await vi.waitFor(async () => expect((await byName("nightly-review")).lastResult?.status).toBe("done"), {
      timeout: 20_000,
      interval: 200,
    });
    await t.app.queue.idle();
    const fired = await byName("nightly-review");
    expect(fired.lastResult).toMatchObject({
      status: "done",
      outcome: "reply",
      text: "Memories merged; nothing needs you.",
    });
    // The next firing is the same time tomorrow.
    expect(new Date(fired.nextFire ?? "").getTime()).toBeGreaterThan(at.getTime() + 23 * 3600_000);
    const spent = await t.app.db.query<{ cost: number; turns: number }>(
      `SELECT sum(cost_usd)::float8 AS cost, count(DISTINCT inbox_id)::int AS turns FROM usage WHERE source = $1`,
      [`cron:${review.id}`],
    );
    expect(spent.rows[0]?.turns).toBe(1);
    expect(spent.rows[0]?.cost).toBeGreaterThan(0);
    await vi.waitFor(async () => expect((await byName("nightly-review")).cost.turns).toBe(1));
    const { cost } = await byName("nightly-review");
    expect(cost.costUsd).toBeCloseTo(spent.rows[0]?.cost ?? -1, 9);
    expect(cost.lastCostUsd).toBeCloseTo(spent.rows[0]?.cost ?? -1, 9);
    // The Usage page counts it under the same name.
    const usage = await raw(t.app.port, "GET", "/api/usage");
    expect(usage.json.bySource.map((row: { source: string }) => row.source)).toContain(`cron:${review.id}`);
  });

  it("refuses a bad change with the reason and keeps the entry as it was", async () => {
    const before = await byName("daily-maintenance");
    const refusals: [unknown, RegExp][] = [
      [{ cronExpression: "every day" }, /is not a cron expression: use five fields/],
      [{ cronExpression: "61 * * * *" }, /is not a valid cron expression/],
      [{ fireAt: "tomorrow" }, /is not a date and time such as 2026-12-24T18:00/],
      [{ cronExpression: "0 5 * * *", fireAt: "2030-01-01T09:00" }, /either cronExpression .* or fireAt/],
      [{}, /nothing to change/],
      [{ note: "   " }, /note: must not be empty/],
      [{ schedule: "0 5 * * *" }, /schedule/],
      [{ note: 42 }, /note/],
    ];
    for (const [body, reason] of refusals) {
      const response = await send("PUT", `/api/schedule/${before.id}`, body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.json.error).toMatch(reason);
    }
    expect((await send("PUT", `/api/schedule/${before.id}`, undefined)).status).toBe(400);
    expect((await send("PUT", "/api/schedule/abc", { note: "x" })).status).toBe(400);
    expect((await send("PUT", "/api/schedule/99999", { note: "x" })).status).toBe(404);
    expect(await byName("daily-maintenance")).toEqual(before);
  });

  it("changes a note and turns an entry into a one-shot in the owner's time zone", async () => {
    const entry = await byName("daily-maintenance");
    const response = await send("PUT", `/api/schedule/${entry.id}`, {
      fireAt: "2030-01-01T09:00",
      note: "[daily-maintenance] Only the scratchpad, please.",
    });
    expect(response.status).toBe(200);
    const changed = (await schedule()).entries.find((one) => one.id === entry.id);
    expect(changed).toMatchObject({
      name: "daily-maintenance",
      cronExpression: null,
      fireAt: "2030-01-01T09:00:00.000Z",
      nextFire: "2030-01-01T09:00:00.000Z",
      note: "[daily-maintenance] Only the scratchpad, please.",
    });
  });

  it("deletes an entry: it is gone from the table and will not fire", async () => {
    const entry = await byName("daily-maintenance");
    const response = await send("DELETE", `/api/schedule/${entry.id}`);
    expect(response.status).toBe(200);
    expect(response.json.entries.map((one: Entry) => one.id)).not.toContain(entry.id);
    expect((await t.app.db.query("SELECT 1 FROM cron_entries WHERE id = $1", [entry.id])).rows).toHaveLength(
      0,
    );
    expect((await send("DELETE", `/api/schedule/${entry.id}`)).status).toBe(404);
  });
});
