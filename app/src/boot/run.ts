import { createLogger } from "@stavrobot/common";
import { startApp, type AppOptions, type RunningApp } from "../app.js";
import { parseAppEnv } from "./env.js";
import { acquireInstanceLock, type InstanceLock } from "./instance-lock.js";
import { resolvePaths } from "./paths.js";
import { exitForRefusal } from "./refusal.js";

export interface MainOptions {
  /** Runs after the app closed, before the process exits (`npm start` stops its siblings). */
  beforeExit?: () => Promise<void>;
  wake?: AppOptions["wake"];
  /** The data directory's lock, when the caller took it already (`npm start`, before its siblings). */
  lock?: InstanceLock;
  ownSiblings?: AppOptions["ownSiblings"];
}

/** The app `main` runs: the current one, across restarts. */
export interface MainApp {
  close(): Promise<void>;
}

/**
 * Starts the app as this process's job and shuts it down cleanly on SIGINT/SIGTERM (the embedded
 * database must close). `main.ts` (the image) and `start-local.ts` (`npm start`) call it; it is
 * not an entry itself, so a bundle holding both never starts the app twice. A start refused for a
 * reason of this machine (another instance on the data directory, a port in use, a directory it
 * may not write) ends in one line saying how to fix it, not a stack trace. The app may ask to be
 * restarted (the Settings page, for a provider it saved): it is closed and started again in this
 * process, config.toml read again, the siblings and the data directory's lock kept.
 */
export async function main(
  env: NodeJS.ProcessEnv = process.env,
  options: MainOptions = {},
): Promise<MainApp> {
  const logger = createLogger("app");
  const beforeExit = options.beforeExit ?? (async () => {});
  let app: RunningApp;
  let lock: InstanceLock;
  try {
    lock = options.lock ?? (await acquireInstanceLock(resolvePaths(parseAppEnv(env)).dataDir));
  } catch (error) {
    await beforeExit();
    return exitForRefusal(error, env, logger);
  }
  let closing = false;
  let restarting: Promise<void> | undefined;
  const start = async (): Promise<RunningApp> => {
    try {
      return await startApp({
        env,
        logger,
        wake: options.wake,
        instanceLock: lock,
        ownSiblings: options.ownSiblings,
        restart: () => void restart(),
      });
    } catch (error) {
      await beforeExit();
      lock.release();
      return exitForRefusal(error, env, logger);
    }
  };
  const restart = (): Promise<void> =>
    (restarting ??= (async () => {
      if (closing) return;
      logger.info("restarting: config.toml is read again (asked for on the Settings page)");
      await app.close();
      app = await start();
      logger.info("restarted");
    })().finally(() => (restarting = undefined)));
  app = await start();
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info("shutting down", { signal });
    // A start meanwhile (a restart) waits for this one instead of being refused.
    lock.markStopping();
    void (restarting ?? Promise.resolve())
      .then(() => app.close())
      .then(beforeExit)
      .then(() => lock.release())
      .then(() => process.exit(0));
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  return {
    async close() {
      await restarting;
      await app.close();
    },
  };
}
