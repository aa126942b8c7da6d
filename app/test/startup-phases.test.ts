import { afterAll, expect, it } from "vitest";
import { createLogger } from "@stavrobot/common";
import { startFakeAnthropic } from "@stavrobot/common/test-support";
import { startApp } from "../src/app.js";
import { configFor, createTestEnv } from "./helpers/app.js";

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

it("logs each start-up phase's duration at debug level, and the total when listening", async () => {
  const fake = await startFakeAnthropic();
  cleanups.push(() => fake.close());
  const env = await createTestEnv(configFor(fake, "anthropic"));
  cleanups.push(() => env.cleanup());
  const lines: string[] = [];
  const app = await startApp({
    env: { ...env.env, PLUGIN_RUNNER_URL: "http://127.0.0.1:9", PYTHON_RUNNER_URL: "http://127.0.0.1:9" },
    logger: createLogger("test", "debug", (line) => lines.push(line)),
  });
  cleanups.push(() => app.close());
  const phases = lines
    .filter((line) => line.includes(" DEBUG ") && line.includes("start-up phase"))
    .map((line) => JSON.parse(line.slice(line.indexOf("{"))) as { phase: string; ms: number });
  expect(phases.map((entry) => entry.phase)).toEqual([
    "config",
    expect.stringMatching(/^database \((postgres|pglite)\)$/),
    "migrations",
    "services and state",
    "warm-up",
    "rehearsal",
    "recovery and scheduler",
    "listening",
  ]);
  for (const entry of phases) expect(entry.ms).toBeGreaterThanOrEqual(0);
  const listening = lines.find((line) => line.includes(" INFO ") && line.includes("listening"));
  expect(listening).toMatch(/"startupMs":\d/);
});
