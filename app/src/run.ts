import { ConfigError, createLogger } from "@stavrobot/common";
import { startApp, type AppOptions, type RunningApp } from "./app.js";

/**
 * Starts the app as this process's job and shuts it down cleanly on SIGINT/SIGTERM (the embedded
 * database must close). `main.ts` (the image) and `start-local.ts` (`npm start`) call it; it is
 * not an entry itself, so a bundle holding both never starts the app twice.
 */
export async function main(
  env: NodeJS.ProcessEnv = process.env,
  beforeExit: () => Promise<void> = async () => {},
  wake: AppOptions["wake"] = {},
): Promise<RunningApp> {
  const logger = createLogger("app");
  let app: RunningApp;
  try {
    app = await startApp({ env, logger, wake });
  } catch (error) {
    await beforeExit();
    if (error instanceof ConfigError) {
      logger.error(error.message);
      process.exit(78);
    }
    throw error;
  }
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info("shutting down", { signal });
    void app
      .close()
      .then(beforeExit)
      .then(() => process.exit(0));
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  return app;
}
