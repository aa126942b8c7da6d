/**
 * `npm start`: runs the assistant on this machine without Docker. The app runs in this process
 * (on the embedded PostgreSQL unless DATABASE_URL or PG* variables point at a server); sibling
 * services run as supervised child processes on loopback.
 */
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { createLogger } from "@stavrobot/common";
import { resolvePaths } from "./app.js";
import { startSibling } from "./local/sibling.js";
import { main } from "./main.js";

const env = process.env;
const paths = resolvePaths(env);
const internalPort = Number(env.INTERNAL_PORT ?? 3001);
const runnerPort = Number(env.PLUGIN_RUNNER_PORT ?? 3003);
const logger = createLogger("launcher");

const runner = startSibling(
  {
    name: "plugin-runner",
    entry: fileURLToPath(new URL("../../plugin-runner/src/main.ts", import.meta.url)),
    env: {
      PATH: env.PATH,
      HOME: env.HOME,
      TZ: env.TZ,
      STAVROBOT_LOG_LEVEL: env.STAVROBOT_LOG_LEVEL,
      HOST: "127.0.0.1",
      PORT: String(runnerPort),
      PLUGINS_DIR: join(paths.dataDir, "plugins"),
      PLUGIN_CACHE_DIR: join(paths.dataDir, "cache", "plugins"),
      PLUGIN_RUNNER_STATE_DIR: join(paths.dataDir, "plugin-runner"),
      // Per installation: the runner empties this at start-up, so two instances must not share it.
      PLUGIN_RUNS_DIR: join(paths.dataDir, "plugin-runner", "runs"),
      APP_INTERNAL_URL: `http://127.0.0.1:${internalPort}`,
      STAVROBOT_INTERNAL_SECRET_FILE: paths.secretFile,
      ...(env.STAVROBOT_INTERNAL_SECRET ? { STAVROBOT_INTERNAL_SECRET: env.STAVROBOT_INTERNAL_SECRET } : {}),
    },
  },
  logger,
);

await main({ ...env, PLUGIN_RUNNER_URL: env.PLUGIN_RUNNER_URL ?? `http://127.0.0.1:${runnerPort}` }, () =>
  runner.stop(),
);
