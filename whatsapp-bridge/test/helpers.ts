import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  closeServer,
  createHttpServer,
  createLogger,
  createServiceListener,
  listen,
} from "@stavrobot/common";
import type { JsonRequest } from "@stavrobot/common/test-support";
import { jsonRequester } from "@stavrobot/common/test-support";
import type { Bridge, BridgeTuning } from "../src/bridge.js";
import { startBridge } from "../src/bridge.js";
import type { BridgeConfig } from "../src/config.js";
import { FakeSockets } from "./fake-socket.js";

export { startFakeApp } from "@stavrobot/common/test-support";
export type { FakeApp, Json } from "@stavrobot/common/test-support";

export const SECRET = "whatsapp-bridge-test-secret-0123456789";

export interface TestBridge {
  url: string;
  root: string;
  config: BridgeConfig;
  bridge: Bridge;
  fake: FakeSockets;
  logs: string[];
  request: JsonRequest;
  stop(): Promise<void>;
}

/**
 * Runs the bridge in this process exactly as main.ts builds it (the domain and the skeleton's
 * listener), with fake sockets instead of Baileys and short timings. `session` says whether a
 * linked session is on disk at the start.
 */
export async function startTestBridge(options: {
  appUrl: string;
  session?: boolean;
  tuning?: BridgeTuning;
}): Promise<TestBridge> {
  const root = mkdtempSync(join(tmpdir(), "whatsapp-bridge-"));
  const config: BridgeConfig = {
    stateDir: join(root, "state"),
    version: undefined,
    appInternalUrl: options.appUrl,
  };
  const fake = new FakeSockets();
  fake.session = options.session ?? true;
  const logs: string[] = [];
  const logger = createLogger("whatsapp-bridge", "debug", (line) => logs.push(line));
  const bridge = await startBridge({
    config,
    secret: SECRET,
    logger,
    socketFactory: () => fake.parts(),
    tuning: { outboxBaseDelayMs: 50, outboxMaxDelayMs: 200, minGapMs: 0, jitterMs: 0, ...options.tuning },
  });
  const server = createHttpServer(createServiceListener(bridge, SECRET, logger));
  const url = `http://127.0.0.1:${await listen(server, 0)}`;
  return {
    url,
    root,
    config,
    bridge,
    fake,
    logs,
    request: jsonRequester(url, SECRET),
    async stop() {
      await closeServer(server);
      await bridge.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
