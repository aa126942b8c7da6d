import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { silentLogger } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { SECRET, startPluginHost, type TestPluginHost } from "../../plugin-runner/test/helpers.js";
import { chat, configFor, createTestEnv, type TestEnv, handOver } from "./helpers/app.js";
import { freePort } from "./helpers/process.js";
import { raw } from "./helpers/http.js";

/**
 * `GET /api/status` (the home page's data) against real parts: the plugin-runner in-process, a
 * python-runner that is not running, Telegram's fake Bot API, and the queue with a turn held open.
 */
let fake: FakeLlmServer;
let telegram: FakeTelegram;
let runner: TestPluginHost;
let env: TestEnv;
let app: RunningApp;
let publicHostname: string;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  telegram = await startFakeTelegram();
  runner = await startPluginHost({ isolation: false });
  const port = await freePort();
  publicHostname = `http://127.0.0.1:${port}`;
  const config = configFor(
    fake,
    "anthropic",
    `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
  ).replace(/^\[queue\]/m, `publicHostname = "${publicHostname}"\n[queue]`);
  env = await createTestEnv(config);
  app = await startApp({
    env: {
      ...env.env,
      PORT: String(port),
      PLUGIN_RUNNER_URL: runner.url,
      // Nothing listens on the discard port: the python-runner is down.
      PYTHON_RUNNER_URL: "http://127.0.0.1:9",
      STAVROBOT_INTERNAL_SECRET: SECRET,
    },
    logger: silentLogger,
  });
});

afterAll(async () => {
  await app?.close();
  await runner?.close();
  await telegram?.close();
  await fake?.close();
  await env?.cleanup();
  if (runner) rmSync(runner.root, { recursive: true, force: true });
});

const status = async () => {
  const answer = await raw(app.port, "GET", "/api/status");
  expect(answer.status).toBe(200);
  return answer.json;
};

describe("GET /api/status", () => {
  it("reports each configured sibling's health, the channels and the uptime", async () => {
    await vi.waitFor(() => expect(telegram.webhook?.url).toBe(`${publicHostname}/telegram/webhook`));
    const answer = await status();
    expect(answer.services).toEqual([
      { name: "plugin-runner", ok: true, detail: expect.stringMatching(/^sandbox: (namespaces|plain)/) },
      { name: "python-runner", ok: false, detail: expect.stringContaining("unreachable") },
    ]);
    expect(answer.channels).toEqual({
      telegram: {
        configured: true,
        webhook: { registered: true, url: `${publicHostname}/telegram/webhook`, pendingUpdates: 0 },
      },
      signal: { configured: false },
      email: { configured: false },
      whatsapp: { configured: false },
    });
    expect(answer.uptimeSeconds).toBeGreaterThanOrEqual(0);
    expect(Date.parse(answer.startedAt)).not.toBeNaN();
    expect((await raw(app.port, "GET", "/api/status", { auth: null })).status).toBe(401);
  });

  it("says when Telegram has no webhook for this app", async () => {
    await fetch(`${telegram.url}/bot${FAKE_TELEGRAM_TOKEN}/deleteWebhook`, { method: "POST" });
    const answer = await status();
    expect(answer.channels.telegram.webhook).toEqual({ registered: false, url: "", pendingUpdates: 0 });
  });

  it("shows the queue busy with a turn and the messages waiting behind it, and counts messages by source", async () => {
    let open = () => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    fake.enqueue({ ...textTurn("first"), gate }, textTurn("second"));
    const first = chat(app, "one");
    await vi.waitFor(() => expect(fake.requests).toHaveLength(1));
    // A plugin's result while the owner's turn runs: it waits for a turn of its own.
    const second = await handOver(app, { source: "plugin:weather/forecast", message: "two" }, SECRET);
    expect(second.status).toBe(202);
    await vi.waitFor(async () => expect((await status()).queue.waiting).toBe(1));
    const busy = await status();
    expect(busy.queue).toMatchObject({ busy: true, currentInboxId: expect.any(Number), waiting: 1 });
    expect(busy.queue.open).toMatchObject({ pending: 1, processing: 1 });
    open();
    await first;
    await vi.waitFor(() => expect(fake.requests).toHaveLength(2));
    await app.queue.idle();
    const idle = await status();
    expect(idle.queue).toEqual({
      busy: false,
      currentInboxId: null,
      waiting: 0,
      open: {},
      deliveries: { waiting: 0, givenUp: 0 },
    });
    expect(idle.messages.total).toBe(2);
    expect(idle.messages.bySource).toEqual(
      expect.arrayContaining([
        { source: "cli", count: 1 },
        { source: "plugin", count: 1 },
      ]),
    );
  });
});
