import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import {
  searchBlocks,
  searchReply,
  startFakeAnthropic,
  startFakeAnthropicSearch,
  startFakeOpenAI,
  textTurn,
  toolTurn,
  type FakeAnthropicSearch,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { PASSWORD, chat, configFor, createTestEnv, type TestEnv, handOver } from "./helpers/app.js";

interface UsageAnswer {
  budgets: Record<"daily" | "monthly", { limitUsd: number | null; spentUsd: number }>;
  days: { day: string; turns: number; costUsd: number; inputTokens: number }[];
  bySource: { source: string; turns: number; costUsd: number }[];
  byPlugin: { plugin: string; turns: number; costUsd: number }[];
  turns: { inboxId: number; source: string | null; plugin: string | null; calls: number; costUsd: number }[];
}

async function usage(app: RunningApp): Promise<UsageAnswer> {
  const answer = await fetch(`http://127.0.0.1:${app.port}/api/usage`, {
    headers: { Authorization: basicAuthHeader(PASSWORD) },
  });
  expect(answer.status).toBe(200);
  return (await answer.json()) as UsageAnswer;
}

async function pluginResult(app: RunningApp, text: string): Promise<void> {
  const answer = await handOver(app, { source: "plugin:weather/forecast", message: text });
  expect(answer.status).toBe(202);
}

async function settled(app: RunningApp): Promise<void> {
  await vi.waitFor(async () => {
    await app.queue.idle();
    const open = await app.db.query("SELECT 1 FROM inbox WHERE status = 'processing'");
    expect(open.rows).toHaveLength(0);
  });
}

describe("usage", () => {
  let fake: FakeLlmServer;
  let search: FakeAnthropicSearch;
  let env: TestEnv;
  let app: RunningApp;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    search = await startFakeAnthropicSearch();
    env = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        `[webSearch]\napiKey = "k"\nmodel = "claude-sonnet-4-5"\nbaseUrl = "${search.url}"\n`,
      ),
    );
    app = await startApp({ env: env.env, logger: silentLogger });
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await search?.close();
    await env?.cleanup();
  });

  it("records every model call of a turn with its source and cost, per day, source, plugin and turn", async () => {
    fake.enqueue(toolTurn("execute_sql", { query: "SELECT 1" }), textTurn("one"));
    await chat(app, "first");
    fake.enqueue(textTurn("noted the forecast"));
    await pluginResult(app, 'The run of tool "forecast" returned: rain');
    await settled(app);
    // web_search's own model call counts too, searches included.
    const found = [{ url: "https://weather.example/today", title: "Today" }];
    search.enqueue(
      searchReply([
        ...searchBlocks("rain today", found),
        ...searchBlocks("rain tomorrow", found),
        { type: "text", text: "It rains." },
      ]),
    );
    fake.enqueue(toolTurn("web_search", { query: "rain?" }), textTurn("it rains"));
    await chat(app, "will it rain?");
    const report = await usage(app);
    const today = report.days.at(-1);
    expect(report.days).toHaveLength(30);
    expect(today?.turns).toBe(3);
    expect(today?.costUsd).toBeGreaterThan(0);
    expect(report.bySource.map((row) => row.source).sort()).toEqual(["cli", "plugin:weather/forecast"]);
    expect(report.byPlugin).toEqual([expect.objectContaining({ plugin: "weather", turns: 1 })]);
    const [searchTurn, pluginTurn, sqlTurn] = report.turns;
    expect(sqlTurn).toMatchObject({ source: "cli", plugin: null, calls: 2 });
    expect(pluginTurn).toMatchObject({ source: "plugin:weather/forecast", plugin: "weather", calls: 1 });
    expect(searchTurn).toMatchObject({ source: "cli", calls: 3 });
    // Two searches at US$0.01 each, on top of the tokens.
    const kinds = await app.db.query<{ kind: string; cost: number }>(
      "SELECT kind, cost_usd AS cost FROM usage WHERE inbox_id = $1 ORDER BY id",
      [searchTurn?.inboxId],
    );
    expect(kinds.rows.map((row) => row.kind)).toEqual(["turn", "web_search", "turn"]);
    expect(kinds.rows[1]?.cost).toBeGreaterThanOrEqual(0.02);
    expect(report.budgets).toEqual({
      daily: { limitUsd: null, spentUsd: expect.any(Number) },
      monthly: { limitUsd: null, spentUsd: expect.any(Number) },
    });
    expect(report.budgets.daily.spentUsd).toBeCloseTo(
      report.turns.reduce((sum, turn) => sum + turn.costUsd, 0),
      6,
    );
  });

  it("names a message sent without a source cli, in the inbox and in its usage, and answers it as before", async () => {
    fake.enqueue(textTurn("answered"));
    const response = await fetch(`http://127.0.0.1:${app.port}/chat`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
      body: JSON.stringify({ message: "no source given" }),
    });
    // The wire contract of POST /chat is unchanged: the same body, the same answer.
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ response: "answered" });
    await settled(app);
    const { rows } = await app.db.query<{ id: number; source: string | null }>(
      "SELECT id, source FROM inbox WHERE payload->>'message' = 'no source given'",
    );
    expect(rows).toEqual([{ id: expect.any(Number), source: "cli" }]);
    const report = await usage(app);
    expect(report.turns.find((turn) => turn.inboxId === rows[0]?.id)).toMatchObject({ source: "cli" });
    expect(report.bySource.map((row) => row.source)).not.toContain("turn");
  });
});

describe("budgets", () => {
  let fake: FakeLlmServer;
  let env: TestEnv;
  let app: RunningApp;
  const config = (fakeServer: FakeLlmServer, daily: number) =>
    configFor(fakeServer, "anthropic", `[budget]\ndaily = ${daily}\nmonthly = 100\n`);

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    // A budget any single turn uses up.
    env = await createTestEnv(config(fake, 0.000001));
    app = await startApp({ env: env.env, logger: silentLogger });
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await env?.cleanup();
  });

  it("refuses a person's turn once the budget is spent, saying why, without calling the model", async () => {
    fake.enqueue(textTurn("this one fits"));
    expect((await chat(app, "hello")).body.response).toBe("this one fits");
    const calls = fake.requests.length;
    const refused = await chat(app, "and another thing");
    expect(refused.body.response).toMatch(/^The daily budget of \$0\.00 is used up \(\$0\.\d+ spent\)/);
    expect(refused.body.response).toContain("Raise [budget] daily in config.toml");
    expect(fake.requests.length).toBe(calls);
    const row = await app.db.query<{ status: string }>("SELECT status FROM inbox ORDER BY id DESC LIMIT 1");
    expect(row.rows[0]?.status).toBe("failed");
    const report = await usage(app);
    expect(report.budgets.daily.limitUsd).toBe(0.000001);
    expect(report.budgets.daily.spentUsd).toBeGreaterThan(0.000001);
  });

  it("holds a plugin's result instead of dropping it, and runs it once the budget allows", async () => {
    const calls = fake.requests.length;
    await pluginResult(app, 'The run of tool "forecast" returned: sun');
    await settled(app);
    expect(fake.requests.length).toBe(calls);
    const held = await app.db.query<{ status: string }>(
      "SELECT status FROM inbox WHERE source = 'plugin:weather/forecast'",
    );
    expect(held.rows).toEqual([{ status: "pending" }]);
    // A new day or a raised budget: here the owner raises it and restarts.
    await app.close();
    const { writeFileSync } = await import("node:fs");
    writeFileSync(env.env.CONFIG_PATH as string, config(fake, 1000));
    fake.enqueue(textTurn("The forecast says sun."));
    app = await startApp({ env: env.env, logger: silentLogger });
    await vi.waitFor(async () => {
      const done = await app.db.query<{ status: string; response: string }>(
        "SELECT status, response FROM inbox WHERE source = 'plugin:weather/forecast'",
      );
      expect(done.rows).toEqual([{ status: "done", response: "The forecast says sun." }]);
    });
  });
});

describe("a custom endpoint's cost", () => {
  let fake: FakeLlmServer;
  let env: TestEnv;
  let app: RunningApp;

  beforeAll(async () => {
    fake = await startFakeOpenAI();
    // configFor's OpenAI-compatible endpoint, priced in config.toml, with a budget one turn uses up.
    env = await createTestEnv(
      configFor(fake, "openai", "[budget]\ndaily = 0.0001\n").replace(
        "maxTokens = 2048",
        "maxTokens = 2048\ncost = { input = 20, output = 80 }",
      ),
    );
    app = await startApp({ env: env.env, logger: silentLogger });
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await env?.cleanup();
  });

  it("is what config.toml says, in the usage report and against the budget", async () => {
    fake.enqueue(textTurn("local answer"));
    expect((await chat(app, "hello")).body.response).toBe("local answer");
    const rows = await app.db.query<{ input: number; output: number; cost: number }>(
      "SELECT input_tokens AS input, output_tokens AS output, cost_usd AS cost FROM usage",
    );
    expect(rows.rows).toHaveLength(1);
    const { input, output, cost } = rows.rows[0]!;
    expect(input).toBeGreaterThan(0);
    expect(Number(cost)).toBeCloseTo((input * 20 + output * 80) / 1_000_000, 12);
    const report = await usage(app);
    expect(report.turns[0]?.costUsd).toBeCloseTo(Number(cost), 12);
    expect(report.budgets.daily.spentUsd).toBeCloseTo(Number(cost), 12);
    // Free, it would never have stopped the next turn.
    const calls = fake.requests.length;
    expect((await chat(app, "again")).body.response).toMatch(/^The daily budget of \$0\.00 is used up/);
    expect(fake.requests.length).toBe(calls);
  });
});
