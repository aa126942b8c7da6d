import { createServer } from "node:http";
import {
  ConfigError,
  closeServer,
  createLogger,
  errorMessage,
  exitWithParent,
  listen,
  resolveInternalSecret,
} from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import { loadConfig } from "./config.js";
import { createRunner } from "./runtime.js";
import { buildServer } from "./server.js";

async function main(): Promise<void> {
  const logger = createLogger("plugin-runner");
  // Until the server is up there is nothing to close: a signal (or the launcher dying while this
  // still waits for the internal secret) just ends the process.
  let shutdown = async (_signal: string): Promise<void> => process.exit(0);
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
  exitWithParent(() => void shutdown("parent exited"));
  const config = loadConfig(process.env);
  const secret = await waitForSecret(config.secretFile, logger);
  const runner = createRunner({
    pluginsDir: config.pluginsDir,
    cacheDir: config.cacheDir,
    stateDir: config.stateDir,
    runsDir: config.runsDir,
    appInternalUrl: config.appInternalUrl,
    secret,
    logger,
    toolEnv: config.toolEnv,
  });
  await runner.start();
  const server = createServer(buildServer(runner.deps));
  const port = await listen(server, config.port, config.host);
  logger.info("plugin-runner listening", { host: config.host, port, plugins: config.pluginsDir });

  shutdown = async (signal: string): Promise<void> => {
    logger.info("shutting down", { signal });
    await closeServer(server);
    await runner.stop();
    process.exit(0);
  };
}

/**
 * STAVROBOT_INTERNAL_SECRET wins; otherwise the file the app creates on its first start
 * (STAVROBOT_INTERNAL_SECRET_FILE). The runner may start first, so it waits a while for that file.
 */
async function waitForSecret(file: string, logger: Logger, waitMs = 60_000): Promise<string> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return resolveInternalSecret({ file, create: false });
    } catch (error) {
      if (!(error instanceof ConfigError) || Date.now() > deadline) throw error;
      if (attempt === 0) logger.info("waiting for the app to create the internal secret", { file });
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`plugin-runner failed to start: ${errorMessage(error)}\n`);
  process.exit(1);
});
