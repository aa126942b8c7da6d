import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, vi } from "vitest";
import {
  closeServer,
  createHttpServer,
  createLogger,
  createServiceListener,
  listen,
} from "@stavrobot/common";
import type { FakeApp, Json, JsonRequest } from "@stavrobot/common/test-support";
import { freePort, jsonRequester, startFakeApp } from "@stavrobot/common/test-support";
import type { Bridge, BridgeTuning } from "../src/bridge.js";
import { startBridge } from "../src/bridge.js";
import type { BridgeConfig } from "../src/config.js";

export { startFakeApp } from "@stavrobot/common/test-support";
export type { FakeApp, Json } from "@stavrobot/common/test-support";

export const SECRET = "signal-bridge-test-secret-0123456789";
export const ACCOUNT = "+15550001111";
export const FAKE_SIGNAL_CLI = fileURLToPath(new URL("./fake-signal-cli.mjs", import.meta.url));

export interface TestBridge {
  url: string;
  root: string;
  config: BridgeConfig;
  bridge: Bridge;
  /** The fake signal-cli's own HTTP address (its /test/ controls live there). */
  fakeUrl: string;
  /** Every log line, at debug level and up. */
  logs: string[];
  request: JsonRequest;
  /** Calls a test control route of the fake signal-cli. */
  control(path: string, body?: unknown): Promise<Json>;
  /** Sends an inbound Signal message through the fake (POST /test/inbound). */
  inbound(body: Record<string, unknown>): Promise<Json>;
  stop(): Promise<void>;
}

export interface TestBridgeOptions {
  appUrl: string;
  signalCliPath?: string;
  tuning?: BridgeTuning;
}

/**
 * Runs the bridge in this process exactly as main.ts builds it (the domain and the skeleton's
 * listener), with the fake signal-cli as its daemon and short timings.
 */
export async function startTestBridge(options: TestBridgeOptions): Promise<TestBridge> {
  const root = mkdtempSync(join(tmpdir(), "signal-bridge-"));
  const config: BridgeConfig = {
    account: ACCOUNT,
    signalCliPath: options.signalCliPath ?? FAKE_SIGNAL_CLI,
    signalCliConfigDir: join(root, "signal-cli"),
    signalCliHttpPort: await freePort(),
    stateDir: join(root, "state"),
    appInternalUrl: options.appUrl,
  };
  const logs: string[] = [];
  const logger = createLogger("signal-bridge", "debug", (line) => logs.push(line));
  const bridge = await startBridge({
    config,
    secret: SECRET,
    logger,
    tuning: {
      restartBaseMs: 100,
      reconnectBaseMs: 50,
      outboxBaseDelayMs: 50,
      outboxMaxDelayMs: 200,
      signalCliEnv: { FAKE_SIGNAL_KEEPALIVE_MS: "200" },
      // An option given as undefined keeps the default above.
      ...Object.fromEntries(Object.entries(options.tuning ?? {}).filter(([, value]) => value !== undefined)),
    },
  });
  const server = createHttpServer(createServiceListener(bridge, SECRET, logger));
  const url = `http://127.0.0.1:${await listen(server, 0)}`;
  const fakeUrl = `http://127.0.0.1:${config.signalCliHttpPort}`;
  const control = async (path: string, body?: unknown): Promise<Json> => {
    const response = await fetch(fakeUrl + path, {
      method: body === undefined ? "GET" : "POST",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status !== 200) throw new Error(`fake ${path}: HTTP ${response.status}`);
    return response.json();
  };
  return {
    url,
    root,
    config,
    bridge,
    fakeUrl,
    logs,
    request: jsonRequester(url, SECRET),
    control,
    inbound: (body) => control("/test/inbound", body),
    async stop() {
      await closeServer(server);
      await bridge.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** A fake app and a bridge delivering to it, listening for Signal messages; `stop` ends both. */
export async function startListeningBridge(): Promise<{
  app: FakeApp;
  bridge: TestBridge;
  stop(): Promise<void>;
}> {
  const app = await startFakeApp();
  const bridge = await startTestBridge({ appUrl: app.url });
  await waitUntilListening(bridge);
  const stop = async () => {
    await bridge.stop();
    await app.close();
  };
  return { app, bridge, stop };
}

/** Waits until signal-cli answers and the bridge listens to its event stream. */
export async function waitUntilListening(bridge: TestBridge, times = 1): Promise<void> {
  await vi.waitFor(() => {
    expect(bridge.bridge.daemon.state).toBe("running");
    const listening = bridge.logs.filter((line) => line.includes("listening for Signal messages"));
    expect(listening.length).toBeGreaterThanOrEqual(times);
  }, 20_000);
}
