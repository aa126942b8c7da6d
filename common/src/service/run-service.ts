import type { RequestListener, Server } from "node:http";
import type { z } from "zod";
import { ConfigError, HttpError, StartRefused, errorMessage } from "../errors.js";
import { resolveInternalSecret } from "../config-file.js";
import { checkBearer } from "../http/auth.js";
import { Router } from "../http/router.js";
import { closeServer, createHttpServer, createRequestListener } from "../http/serve.js";
import type { Logger, LogLevel } from "../logger.js";
import { createLogger } from "../logger.js";
import { EXIT_CONFIG, baseServiceEnv, parseEnv } from "./env.js";
import { listenOrRefuse } from "./listen.js";

export type ServiceEnv = z.infer<typeof baseServiceEnv>;

export interface ServiceParts {
  /** The service's routes; `GET /health` is added (open) and every other route needs the Bearer secret. */
  router: Router;
  /** Extra fields for `GET /health` (e.g. how untrusted code is sandboxed). */
  health?: () => Record<string, unknown>;
  /** Called after the server stopped taking requests and the ones in flight were answered. */
  stop?: () => Promise<void>;
}

export interface ServiceDefinition<T extends z.ZodObject> {
  /** e.g. "python-runner": names the logs and the configuration errors. */
  name: string;
  /** The service's own variables; merged with `baseServiceEnv`. Defaults belong here. */
  env: T;
  /**
   * Set before `build` (e.g. 0o077: the service's own files are private; what it gives untrusted
   * users gets an explicit mode).
   */
  umask?: number;
  build(context: {
    env: z.infer<T> & ServiceEnv;
    secret: string;
    logger: Logger;
  }): Promise<ServiceParts> | ServiceParts;
}

export interface RunningService {
  port: number;
  server: Server;
  /** Stops taking requests, lets those in flight finish (up to the grace time), then stops the service. */
  stop(): Promise<void>;
}

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  /** How long requests in flight may take to finish on shutdown. */
  graceMs?: number;
  /** How long to wait for the app to create the internal secret file. */
  secretWaitMs?: number;
  /** Install SIGTERM/SIGINT/parent-exit handlers and exit the process (default true). */
  handleSignals?: boolean;
  logger?: Logger;
}

/**
 * Everything a sibling service does besides its own domain, written once: parse the environment
 * (exit 78 naming the variable), read or wait for the internal secret, guard every route but
 * `GET /health` with it, listen with bounded receive times, and turn SIGTERM, SIGINT or the death
 * of the launcher into an orderly stop (no new requests, those in flight finish, then the
 * service's own stop).
 */
export async function runService<T extends z.ZodObject>(
  definition: ServiceDefinition<T>,
  options: RunOptions = {},
): Promise<RunningService> {
  const env = options.env ?? process.env;
  const handleSignals = options.handleSignals ?? true;
  let parsed: z.infer<T> & ServiceEnv;
  try {
    parsed = parseEnv(definition.name, baseServiceEnv.extend(definition.env.shape), env) as z.infer<T> &
      ServiceEnv;
  } catch (error) {
    if (!(error instanceof ConfigError) || !handleSignals) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(EXIT_CONFIG);
  }
  const logger = options.logger ?? createLogger(definition.name, parsed.STAVROBOT_LOG_LEVEL as LogLevel);
  // Until the server is up there is nothing to close: a signal (or the launcher dying while this
  // still waits for the secret) just ends the process.
  let shutdown = async (_reason: string): Promise<void> => process.exit(0);
  if (handleSignals) {
    process.once("SIGTERM", () => void shutdown("SIGTERM"));
    process.once("SIGINT", () => void shutdown("SIGINT"));
    if (env.STAVROBOT_EXIT_WITH_PARENT) {
      process.stdin.on("end", () => void shutdown("parent exited"));
      process.stdin.on("error", () => void shutdown("parent exited"));
      process.stdin.resume();
    }
  }
  const secret =
    parsed.STAVROBOT_INTERNAL_SECRET ??
    (await waitForSecret(parsed.STAVROBOT_INTERNAL_SECRET_FILE, logger, options.secretWaitMs ?? 60_000));
  if (definition.umask !== undefined) process.umask(definition.umask);
  const parts = await definition.build({ env: parsed, secret, logger });
  const instance = parsed.STAVROBOT_INSTANCE_ID;
  const health = instance ? () => ({ ...parts.health?.(), instance }) : parts.health;
  const server = createHttpServer(createServiceListener({ ...parts, health }, secret, logger));
  let port: number;
  try {
    port = await listenOrRefuse(server, {
      service: definition.name,
      port: parsed.PORT,
      host: parsed.HOST,
      variable: parsed.STAVROBOT_PORT_VARIABLE,
    });
  } catch (error) {
    await parts.stop?.().catch(() => undefined);
    if (!(error instanceof StartRefused) || !handleSignals) throw error;
    // One line for the person starting it; the exit code tells a launcher why.
    process.stderr.write(`${error.message}\n`);
    process.exit(error.exitCode);
  }
  logger.info(`${definition.name} listening`, { host: parsed.HOST, port });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await closeServer(server, options.graceMs ?? 10_000);
      await parts.stop?.();
    })();
    return stopping;
  };
  shutdown = async (reason: string) => {
    logger.info("shutting down", { reason });
    try {
      await stop();
    } catch (error) {
      logger.error("error while stopping", { error: errorMessage(error) });
    }
    process.exit(0);
  };
  return { port, server, stop };
}

/**
 * A service's request listener: an open `GET /health` (with the service's extra fields) and the
 * service's routes behind the Bearer internal secret. Tests and benches build a service's server
 * with this too, so they exercise exactly what runs.
 */
export function createServiceListener(
  parts: Pick<ServiceParts, "router" | "health">,
  secret: string,
  logger: Logger,
): RequestListener {
  const router = new Router()
    .get("/health", () => ({ json: { status: "ok", ...parts.health?.() } }), { public: true })
    .include(parts.router);
  return createRequestListener(router, {
    logger,
    guard: ({ req, publicRoute }) => {
      if (!publicRoute && !checkBearer(req.headers.authorization, secret))
        throw new HttpError(401, "Unauthorized");
    },
  });
}

/**
 * STAVROBOT_INTERNAL_SECRET wins; otherwise the file the app creates on its first start. A
 * service may start before the app, so it waits a while for that file.
 */
export async function waitForSecret(file: string, logger: Logger, waitMs: number): Promise<string> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return resolveInternalSecret({ env: {}, file, create: false });
    } catch (error) {
      if (!(error instanceof ConfigError) || Date.now() > deadline) throw error;
      if (attempt === 0) logger.info("waiting for the app to create the internal secret", { file });
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
