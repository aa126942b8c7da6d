import { readdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { freePort } from "@stavrobot/common/test-support";
import type { FakeApp, TestBridge } from "./helpers.js";
import { startFakeApp, startTestBridge, waitUntilListening } from "./helpers.js";

const erin = "+15550005555";
/** Loose: these tests run beside others and start real processes. */
const WAIT = { timeout: 15_000 };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setUp(
  options: { app?: FakeApp; appUrl?: string; healthyResetMs?: number; reconnectBaseMs?: number } = {},
) {
  const app = options.app ?? (await startFakeApp());
  if (!options.app && !options.appUrl) cleanups.push(() => app.close());
  const bridge = await startTestBridge({
    appUrl: options.appUrl ?? app.url,
    tuning: { healthyResetMs: options.healthyResetMs, reconnectBaseMs: options.reconnectBaseMs },
  });
  cleanups.push(() => bridge.stop());
  await waitUntilListening(bridge);
  return { app, bridge };
}

function messages(app: FakeApp): (string | undefined)[] {
  return app.messages.map((m) => m.message);
}

function count(bridge: TestBridge, text: string): number {
  return bridge.logs.filter((line) => line.includes(text)).length;
}

/** The restart delays the bridge announced, in order. */
function restartDelays(bridge: TestBridge): number[] {
  return bridge.logs
    .filter((line) => line.includes("signal-cli exited; restarting"))
    .map((line) => Number(/"inMs":(\d+)/.exec(line)?.[1]));
}

/** Kills the fake signal-cli; returns once its successor runs and the event stream is back. */
async function crash(bridge: TestBridge): Promise<void> {
  const ready = count(bridge, "signal-cli is ready");
  const listening = count(bridge, "listening for Signal messages");
  await bridge.control("/test/exit", { code: 1 });
  await vi.waitFor(() => expect(count(bridge, "signal-cli is ready")).toBe(ready + 1), WAIT);
  await waitUntilListening(bridge, listening + 1);
}

describe("when signal-cli or its event stream goes away", () => {
  it("restarts a dead signal-cli with growing delays, reconnects, and keeps delivering", async () => {
    const { app, bridge } = await setUp({ healthyResetMs: 3_000 });
    const firstPid = bridge.bridge.daemon.pid;
    await crash(bridge);
    expect(bridge.bridge.daemon.pid).not.toBe(firstPid);
    // Dying again at once: the delay doubles.
    await crash(bridge);
    await bridge.inbound({ source: erin, message: "after two restarts" });
    await vi.waitFor(() => expect(messages(app)).toContain("after two restarts"), WAIT);

    // After running healthily for longer than healthyResetMs, the delay starts over.
    await sleep(3_200);
    await crash(bridge);
    expect(restartDelays(bridge)).toEqual([100, 200, 100]);
    expect(bridge.logs.join("\n")).toMatch(/signal-cli exited; restarting \{"code":1,"signal":null/);
    expect(count(bridge, "Signal event stream closed; reconnecting")).toBeGreaterThanOrEqual(3);

    await bridge.inbound({ source: erin, message: "after three restarts" });
    await vi.waitFor(() => expect(messages(app)).toContain("after three restarts"), WAIT);
    expect(messages(app).filter((m) => m === "after two restarts")).toHaveLength(1);
  });

  it("reconnects a dropped event stream without restarting signal-cli, missing nothing and repeating nothing", async () => {
    // Reconnecting only after a pause, so the next message surely arrives while disconnected.
    const { app, bridge } = await setUp({ reconnectBaseMs: 500 });
    const pid = bridge.bridge.daemon.pid;
    await bridge.inbound({ source: erin, message: "before the drop" });
    await vi.waitFor(() => expect(messages(app)).toContain("before the drop"), WAIT);

    expect(await bridge.control("/test/drop-streams", {})).toEqual({ dropped: 1 });
    // Arrives while the bridge is not connected: replayed on reconnection (Last-Event-ID).
    await bridge.inbound({ source: erin, message: "during the gap" });
    await waitUntilListening(bridge, 2);
    await bridge.inbound({ source: erin, message: "after the drop" });
    await vi.waitFor(() => expect(messages(app)).toContain("after the drop"), WAIT);
    await vi.waitFor(() => expect(messages(app)).toContain("during the gap"), WAIT);
    // Nothing more comes (a replayed message would come twice).
    await sleep(300);
    expect(app.messages.map((m) => m.message)).toEqual([
      "before the drop",
      "during the gap",
      "after the drop",
    ]);
    expect(bridge.bridge.daemon.pid).toBe(pid);
    expect(count(bridge, "signal-cli exited")).toBe(0);
  });

  it("keeps a message while the app is down and delivers it once when the app is back", async () => {
    const port = await freePort();
    const { bridge } = await setUp({ appUrl: `http://127.0.0.1:${port}` });
    await bridge.inbound({ source: erin, message: "while you were away" });
    const outbox = join(bridge.config.stateDir, "outbox");
    await vi.waitFor(() => expect(count(bridge, "could not deliver a message yet")).toBeGreaterThan(1), WAIT);
    expect(readdirSync(outbox).filter((name) => name.endsWith(".json"))).toHaveLength(1);

    const app = await startFakeApp({ port });
    cleanups.push(() => app.close());
    await vi.waitFor(() => expect(app.messages).toHaveLength(1), WAIT);
    expect(app.messages[0]).toMatchObject({ source: "signal", sender: erin, message: "while you were away" });
    // Delivered once: nothing more comes.
    await sleep(500);
    expect(app.messages).toHaveLength(1);
    expect(readdirSync(outbox).filter((name) => name.endsWith(".json"))).toEqual([]);
  });
});
