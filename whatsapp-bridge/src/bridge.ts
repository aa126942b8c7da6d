import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Logger, Router } from "@stavrobot/common";
import { Outbox, addStateArchiveRoute, createServiceClient } from "@stavrobot/common";
import type { BridgeConfig } from "./config.js";
import type { ConnectionTuning, SocketFactory } from "./connection.js";
import { WhatsAppConnection } from "./connection.js";
import { StateEvents } from "./events.js";
import { createInboundHandler } from "./inbound.js";
import { Outbound, type OutboundTuning } from "./outbound.js";
import { buildRoutes } from "./routes.js";

/** Timings (tests shorten them). */
export interface BridgeTuning extends ConnectionTuning, OutboundTuning {
  outboxBaseDelayMs?: number;
  outboxMaxDelayMs?: number;
}

export interface BridgeOptions {
  config: BridgeConfig;
  /** The internal secret, sent to the app as the Bearer token. */
  secret: string;
  logger: Logger;
  /** Opens a socket (Baileys', or a test's fake); gets the session's directory. */
  socketFactory: (authDir: string) => {
    factory: SocketFactory;
    hasSession(): Promise<boolean>;
    clearSession(): Promise<void>;
  };
  tuning?: BridgeTuning;
}

export interface Bridge {
  router: Router;
  health(): Record<string, unknown>;
  connection: WhatsAppConnection;
  outbox: Outbox;
  stop(): Promise<void>;
}

/**
 * Builds and starts the whole bridge: the outbox to the app, the connection (which connects at
 * once when a session is on disk, else waits to be linked), and the routes. Returns at once.
 */
export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const { config, logger } = options;
  const tuning = options.tuning ?? {};
  await mkdir(config.stateDir, { recursive: true, mode: 0o700 });
  const outbox = new Outbox({
    dir: join(config.stateDir, "outbox"),
    keyPrefix: "whatsapp-bridge",
    name: "whatsapp-bridge",
    app: createServiceClient({ baseUrl: config.appInternalUrl, bearer: options.secret, retries: 0 }),
    logger: logger.child("outbox"),
    baseDelayMs: tuning.outboxBaseDelayMs ?? 2_000,
    maxDelayMs: tuning.outboxMaxDelayMs ?? 60_000,
  });
  await outbox.start();
  const session = options.socketFactory(join(config.stateDir, "auth"));
  const received = { note: () => undefined as void };
  const late: { events?: StateEvents } = {};
  const inbound = createInboundHandler({ outbox, logger, onReceived: () => received.note() });
  const connection = new WhatsAppConnection({
    factory: session.factory,
    hasSession: session.hasSession,
    clearSession: session.clearSession,
    onMessages: (socket, messages) => void inbound(socket, messages),
    onState: (status) => {
      logger.info("WhatsApp state", { state: status.whatsapp, problem: status.problem });
      late.events?.publish(status);
    },
    logger,
    tuning,
  });
  received.note = () => connection.noteInbound();
  const events = new StateEvents(() => connection.linkStatus());
  late.events = events;
  const outbound = new Outbound(connection, logger, tuning);
  await connection.start();
  return {
    // The session and the outbox, for the app's full backup (`GET /state-archive`).
    router: addStateArchiveRoute(
      events.addRoute(buildRoutes(outbound, connection)),
      [{ name: "whatsapp-bridge", dir: config.stateDir }],
      logger,
    ),
    health: () => connection.health(),
    connection,
    outbox,
    async stop() {
      events.close();
      await connection.stop();
      await outbox.stop();
    },
  };
}
