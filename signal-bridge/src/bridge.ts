import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Logger, Router, SignalCliState } from "@stavrobot/common";
import { Outbox, addStateArchiveRoute, createServiceClient } from "@stavrobot/common";
import type { BridgeConfig } from "./config.js";
import { attachmentsDir, signalCliArgs } from "./config.js";
import { SignalCliDaemon } from "./daemon.js";
import { EventStream } from "./events.js";
import { createInboundHandler } from "./inbound.js";
import { Outbound } from "./outbound.js";
import { buildRoutes } from "./routes.js";
import { createRpcClient } from "./rpc.js";

/** Timings (tests shorten them) and extra environment for signal-cli. */
export interface BridgeTuning {
  restartBaseMs?: number;
  restartMaxMs?: number;
  healthyResetMs?: number;
  startupTimeoutMs?: number;
  reconnectBaseMs?: number;
  idleTimeoutMs?: number;
  outboxBaseDelayMs?: number;
  outboxMaxDelayMs?: number;
  signalCliEnv?: Record<string, string>;
}

export interface BridgeOptions {
  config: BridgeConfig;
  /** The internal secret, sent to the app as the Bearer token. */
  secret: string;
  logger: Logger;
  tuning?: BridgeTuning;
}

export interface Bridge {
  router: Router;
  health(): { signalCli: SignalCliState; problem?: string; account: string };
  daemon: SignalCliDaemon;
  outbox: Outbox;
  /** Stops reading events, stops signal-cli, then the outbox (pending messages stay on disk). */
  stop(): Promise<void>;
}

/**
 * Builds and starts the whole bridge: the outbox to the app, signal-cli under supervision, the
 * event stream feeding incoming messages into the outbox, and the routes for sending. Returns at
 * once; signal-cli comes up in the background (`/send` answers 503 until it does).
 */
export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const { config, logger } = options;
  const tuning = options.tuning ?? {};
  await mkdir(config.stateDir, { recursive: true, mode: 0o700 });
  const outbox = new Outbox({
    dir: join(config.stateDir, "outbox"),
    keyPrefix: "signal-bridge",
    name: "signal-bridge",
    app: createServiceClient({ baseUrl: config.appInternalUrl, bearer: options.secret, retries: 0 }),
    logger: logger.child("outbox"),
    // Somebody is waiting for an answer: once the app is back, their message should follow soon.
    baseDelayMs: tuning.outboxBaseDelayMs ?? 2_000,
    maxDelayMs: tuning.outboxMaxDelayMs ?? 60_000,
  });
  await outbox.start();

  const baseUrl = `http://127.0.0.1:${config.signalCliHttpPort}`;
  const daemon = new SignalCliDaemon({
    command: config.signalCliPath,
    args: signalCliArgs(config),
    baseUrl,
    logger,
    pidFile: join(config.stateDir, "signal-cli.pid"),
    env: tuning.signalCliEnv,
    restartBaseMs: tuning.restartBaseMs,
    restartMaxMs: tuning.restartMaxMs,
    healthyResetMs: tuning.healthyResetMs,
    startupTimeoutMs: tuning.startupTimeoutMs,
  });
  const outbound = new Outbound({
    rpc: createRpcClient(baseUrl),
    daemon,
    tempDir: join(config.stateDir, "tmp"),
    logger,
  });
  await outbound.start();
  const events = new EventStream({
    baseUrl,
    daemon,
    logger,
    onReceive: createInboundHandler({ outbox, attachmentsDir: attachmentsDir(config), logger }),
    reconnectBaseMs: tuning.reconnectBaseMs,
    idleTimeoutMs: tuning.idleTimeoutMs,
  });
  await daemon.start();
  events.start();

  return {
    // signal-cli's account and the bridge's state, for the app's full backup (`GET /state-archive`).
    router: addStateArchiveRoute(
      buildRoutes(outbound),
      [
        { name: "signal-cli", dir: config.signalCliConfigDir },
        { name: "signal-bridge", dir: config.stateDir },
      ],
      logger,
    ),
    health: () => {
      const problem = daemon.problem;
      return { signalCli: daemon.state, ...(problem ? { problem } : {}), account: config.account };
    },
    daemon,
    outbox,
    async stop() {
      await events.stop();
      await daemon.stop();
      await outbox.stop();
    },
  };
}
