/**
 * `npm run bench`: figures for the closing notes, measured with the fake LLM answering at once.
 *   1. /chat round-trip overhead (p50/p95) for a turn with one tool call.
 *   2. Input tokens sent per turn over a fixed 20-turn conversation, and the prompt-cache share.
 *   3. Idle resident memory of the app process (embedded PGlite, and a PostgreSQL server if
 *      BENCH_DATABASE_URL or TEST_DATABASE_URL names one the bench may create databases on).
 *   4. plugin-runner overhead and throughput, and what the agent's run_plugin_tool adds to a spawn.
 */
import { readFileSync } from "node:fs";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { chat, configFor, createTestEnv, startTestApp } from "../test/helpers/app.js";
import { startAppProcess } from "../test/helpers/process.js";
import { benchRunPluginTool } from "./plugin-tool.js";

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function roundTrip(fake: FakeLlmServer, turns: number): Promise<Record<string, string>> {
  const testEnv = await createTestEnv(configFor(fake).replace("[queue]", "contextTokensK = 2000\n[queue]"));
  const app = await startTestApp(testEnv);
  try {
    fake.setResponder((request) =>
      request.lastUserText.includes("Text: ")
        ? toolTurn("execute_sql", { query: "SELECT 1 AS one" })
        : textTurn("done"),
    );
    for (let i = 0; i < 5; i++) await chat(app, `warm-up ${i}`);
    const times: number[] = [];
    for (let i = 0; i < turns; i++) {
      const start = performance.now();
      const reply = await chat(app, `turn ${i}`);
      times.push(performance.now() - start);
      if (reply.body.response !== "done") throw new Error(`unexpected reply ${JSON.stringify(reply.body)}`);
    }
    times.sort((a, b) => a - b);
    return {
      "chat round trip, 1 tool call (p50)": `${percentile(times, 50).toFixed(1)} ms`,
      "chat round trip, 1 tool call (p95)": `${percentile(times, 95).toFixed(1)} ms`,
      "chat round trip turns measured": `${turns} (history grows to ${turns * 4 + 20} messages; database: ${app.db.kind})`,
    };
  } finally {
    fake.setResponder(undefined);
    await app.close();
    await testEnv.cleanup();
  }
}

async function tokensPerTurn(fake: FakeLlmServer): Promise<Record<string, string>> {
  fake.reset();
  const testEnv = await createTestEnv(configFor(fake));
  const app = await startTestApp(testEnv);
  try {
    // A fixed script: every third turn runs a query, the others answer directly.
    let turn = 0;
    fake.setResponder((request) => {
      if (request.lastUserText.includes("Text: ")) {
        turn++;
        if (turn % 3 === 0) return toolTurn("execute_sql", { query: `SELECT ${turn} AS n` });
        return textTurn(`Answer ${turn}: ${"a reasonably sized reply sentence. ".repeat(6)}`);
      }
      return textTurn(`The query returned ${turn}.`);
    });
    for (let i = 1; i <= 20; i++)
      await chat(app, `Question ${i}: ${"tell me something about the garden. ".repeat(4)}`);
    const usage = await app.db.query<{ input: number; cache_read: number; cache_write: number }>(
      `SELECT (content->'usage'->>'input')::int AS input, (content->'usage'->>'cacheRead')::int AS cache_read,
              (content->'usage'->>'cacheWrite')::int AS cache_write
       FROM messages WHERE role = 'assistant'`,
    );
    let total = 0;
    let read = 0;
    for (const row of usage.rows) {
      total += row.input + row.cache_read + row.cache_write;
      read += row.cache_read;
    }
    return {
      "input tokens per turn (20-turn conversation)": `${Math.round(total / 20)} (total ${total}, ${usage.rows.length} LLM calls)`,
      "share served from the prompt cache": `${((100 * read) / total).toFixed(1)} %`,
    };
  } finally {
    fake.setResponder(undefined);
    await app.close();
    await testEnv.cleanup();
  }
}

/** Idle RSS after a restart (the first start of an embedded database also runs initdb). */
async function idleRss(fake: FakeLlmServer, label: string): Promise<Record<string, string>> {
  const testEnv = await createTestEnv(configFor(fake));
  try {
    await (await startAppProcess(testEnv.env)).stop();
    const running = await startAppProcess(testEnv.env);
    try {
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const status = readFileSync(`/proc/${running.child.pid}/status`, "utf8");
      const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
      return { [`idle RSS of the app (${label})`]: `${(rss / 1024).toFixed(0)} MB` };
    } finally {
      await running.stop();
    }
  } finally {
    await testEnv.cleanup();
  }
}

async function pluginRunnerFigures(): Promise<Record<string, string>> {
  try {
    const module = (await import("../../plugin-runner/bench/bench.js")) as {
      benchPluginRunner: () => Promise<Record<string, string>>;
    };
    return await module.benchPluginRunner();
  } catch (error) {
    return { "plugin-runner": `not measured (${(error as Error).message.split("\n")[0]})` };
  }
}

const fake = await startFakeAnthropic();
const figures: Record<string, string> = {};
try {
  const serverUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
  if (serverUrl) process.env.TEST_DATABASE_URL = serverUrl;
  Object.assign(figures, await roundTrip(fake, 100));
  Object.assign(figures, await tokensPerTurn(fake));
  delete process.env.TEST_DATABASE_URL;
  Object.assign(figures, await idleRss(fake, "embedded PGlite in the process"));
  if (serverUrl) {
    process.env.TEST_DATABASE_URL = serverUrl;
    Object.assign(figures, await idleRss(fake, "PostgreSQL server"));
  }
  Object.assign(figures, await pluginRunnerFigures());
  Object.assign(figures, await benchRunPluginTool());
} finally {
  await fake.close();
}
const width = Math.max(...Object.keys(figures).map((key) => key.length));
for (const [key, value] of Object.entries(figures)) console.log(`${key.padEnd(width)}  ${value}`);
