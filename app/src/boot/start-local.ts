/**
 * `npm start`: runs the assistant on this machine without Docker. The app runs in this process
 * (on the embedded PostgreSQL unless DATABASE_URL or PG* variables point at a server); sibling
 * services run as supervised child processes on loopback: the plugin-runner always, the
 * python-runner from its first use, the coder when `[coder]` is configured, the Signal bridge
 * when `[signal]`.
 */
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { EXIT_CONFIG, EXIT_IN_USE, createLogger, errorMessage, parseEnv } from "@stavrobot/common";
import type { MainApp } from "./run.js";
import { APP_LAYOUT } from "./app-dir.js";
import { loadConfig, type AppConfig } from "./config.js";
import { parseAppEnv } from "./env.js";
import { startSibling, type Sibling } from "../local/sibling.js";
import { toolPathFor } from "../local/tool-path.js";
import { exitForRefusal } from "./refusal.js";
import { resolvePaths } from "./paths.js";
import { writeMcpServersFile } from "./mcp-servers.js";
import { acquireInstanceLock } from "./instance-lock.js";
import { findFile } from "./files.js";
import { mayAskFirstRun, runFirstRun } from "./first-run.js";
import type { OwnSiblings } from "../local/own-sibling.js";
import { refusePortsInUse, type PortClaim } from "../local/ports.js";
import { loadPglite, usesServer } from "../db/pglite-load.js";

/** A sibling's loopback port: the app is told where it is, so "any free port" (0) will not do. */
const port = (fallback: number) => z.coerce.number().int().min(1).max(65535).default(fallback);

/** The launcher's own variables: where the sibling services listen. */
const launcherEnvSchema = z.object({
  PLUGIN_RUNNER_PORT: port(3003),
  PYTHON_RUNNER_PORT: port(3004),
  CODER_PORT: port(3002),
  SIGNAL_BRIDGE_PORT: port(8081),
  WHATSAPP_BRIDGE_PORT: port(8082),
});

const env = process.env;
const logger = createLogger("launcher");
let settings;
let launcherEnv;
try {
  settings = parseAppEnv(env);
  launcherEnv = parseEnv("launcher", launcherEnvSchema, env);
} catch (error) {
  logger.error((error as Error).message);
  process.exit(EXIT_CONFIG);
}
const paths = resolvePaths(settings);
const ports = {
  internal: settings.INTERNAL_PORT,
  pluginRunner: launcherEnv.PLUGIN_RUNNER_PORT,
  pythonRunner: launcherEnv.PYTHON_RUNNER_PORT,
  coder: launcherEnv.CODER_PORT,
  signalBridge: launcherEnv.SIGNAL_BRIDGE_PORT,
  whatsappBridge: launcherEnv.WHATSAPP_BRIDGE_PORT,
};
// The first start at a terminal asks for a provider before anything else starts.
if (mayAskFirstRun(env, process, existsSync(paths.configPath))) {
  const host = /^(127\.0\.0\.1|0\.0\.0\.0|::)$/.test(settings.HOST) ? "localhost" : settings.HOST;
  await refuseOrRun(() =>
    runFirstRun({
      configPath: paths.configPath,
      examplePath: findFile("config.example.toml"),
      address: `http://${host}:${settings.PORT}`,
      input: process.stdin,
      output: process.stdout,
    }),
  );
}
const config = readConfig();
const urlVariables: Record<string, string> = {
  "plugin-runner": "PLUGIN_RUNNER_URL",
  "python-runner": "PYTHON_RUNNER_URL",
  coder: "CODER_URL",
  "signal-bridge": "SIGNAL_BRIDGE_URL",
  "whatsapp-bridge": "WHATSAPP_BRIDGE_URL",
};
/** A sibling the app is pointed at by URL is not started here (nor is its port claimed). */
const own = (service: string): boolean => !env[urlVariables[service] as string];
// One data directory, one instance: taken before any sibling starts on it.
const lock = await refuseOrRun(() => acquireInstanceLock(paths.dataDir));
/** Every port this start listens on, checked at once so a second checkout learns all it must move. */
const claims: PortClaim[] = [
  { port: settings.PORT, host: settings.HOST, variable: "PORT" },
  { port: ports.internal, host: settings.INTERNAL_HOST ?? settings.HOST, variable: "INTERNAL_PORT" },
  ...(own("plugin-runner")
    ? [{ port: ports.pluginRunner, host: "127.0.0.1", variable: "PLUGIN_RUNNER_PORT" }]
    : []),
  ...(own("python-runner")
    ? [{ port: ports.pythonRunner, host: "127.0.0.1", variable: "PYTHON_RUNNER_PORT" }]
    : []),
  ...(config?.coder && own("coder")
    ? [{ port: ports.coder, host: "127.0.0.1", variable: "CODER_PORT" }]
    : []),
  ...(config?.signal && own("signal-bridge")
    ? [{ port: ports.signalBridge, host: "127.0.0.1", variable: "SIGNAL_BRIDGE_PORT" }]
    : []),
  ...(config?.whatsapp && own("whatsapp-bridge")
    ? [{ port: ports.whatsappBridge, host: "127.0.0.1", variable: "WHATSAPP_BRIDGE_PORT" }]
    : []),
];
await refuseOrRun(() => refusePortsInUse(claims));
// The siblings show it in GET /health; the app uses a sibling only once it showed this one.
const instance = randomUUID();
const variables: Record<string, string> = {
  "plugin-runner": "PLUGIN_RUNNER_PORT",
  "python-runner": "PYTHON_RUNNER_PORT",
  coder: "CODER_PORT",
  "signal-bridge": "SIGNAL_BRIDGE_PORT",
  "whatsapp-bridge": "WHATSAPP_BRIDGE_PORT",
};
const ownSiblings: OwnSiblings = {
  instance,
  variables: Object.fromEntries(Object.entries(variables).filter(([name]) => own(name))),
};

/** What every sibling gets: loopback, the internal secret, the way back to the app. */
const common = {
  PATH: env.PATH,
  HOME: env.HOME,
  TZ: env.TZ,
  STAVROBOT_LOG_LEVEL: env.STAVROBOT_LOG_LEVEL,
  HOST: "127.0.0.1",
  APP_INTERNAL_URL: `http://127.0.0.1:${ports.internal}`,
  STAVROBOT_INTERNAL_SECRET_FILE: paths.secretFile,
  STAVROBOT_INSTANCE_ID: instance,
  ...pick(["STAVROBOT_INTERNAL_SECRET"]),
};
/** An eager sibling that could not listen stops the start (it said which port and variable). */
const portInUse = () => void stopStart();
// The siblings run the way this launcher does: bundled (npm start), compiled, or from sources (tests).
const { rootDir, codeDir } = APP_LAYOUT;
const entry = (service: string) => join(rootDir, service, codeDir, codeDir === "src" ? "main.ts" : "main.js");
const pluginsDir = join(paths.dataDir, "plugins");

// The plugin-runner finds the owner's MCP servers from its first moment (the app writes them again).
if (config) await writeMcpServersFile(paths, config);

const siblings: Sibling[] = [];
if (own("plugin-runner")) {
  siblings.push(
    startSibling(
      {
        name: "plugin-runner",
        entry: entry("plugin-runner"),
        onPortInUse: portInUse,
        env: {
          ...common,
          PORT: String(ports.pluginRunner),
          STAVROBOT_PORT_VARIABLE: "PLUGIN_RUNNER_PORT",
          PLUGINS_DIR: pluginsDir,
          PLUGIN_CACHE_DIR: join(paths.dataDir, "cache", "plugins"),
          PLUGIN_DATA_DIR: join(paths.dataDir, "plugin-data"),
          ...(config?.plugins?.allowWithoutNetworkCut ? { PLUGIN_ALLOW_WITHOUT_NETWORK_CUT: "1" } : {}),
          ...(config?.plugins?.timeoutSeconds
            ? { PLUGIN_TIMEOUT_SECONDS: String(config.plugins.timeoutSeconds) }
            : {}),
          ...(config?.plugins?.osaurusTrustedKeys.length
            ? { PLUGIN_OSAURUS_TRUSTED_KEYS: config.plugins.osaurusTrustedKeys.join(",") }
            : {}),
          PLUGIN_RUNNER_STATE_DIR: join(paths.dataDir, "plugin-runner"),
          MCP_SERVERS_FILE: paths.mcpServersFile,
          // Tools find uv, python3, node and git where this launcher finds them.
          PLUGIN_TOOL_PATH: toolPathFor(env.PATH ?? "", env),
          ...pick(["PLUGIN_SANDBOX", "UV_PYTHON_INSTALL_DIR", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"]),
        },
      },
      logger,
    ),
  );
}
const pythonRunner = own("python-runner")
  ? startSibling(
      {
        name: "python-runner",
        entry: entry("python-runner"),
        // Most turns never run Python: it starts with the first run_python (or the status page).
        lazy: { health: `http://127.0.0.1:${ports.pythonRunner}/health` },
        env: {
          ...common,
          PORT: String(ports.pythonRunner),
          STAVROBOT_PORT_VARIABLE: "PYTHON_RUNNER_PORT",
          PYTHON_RUNNER_STATE_DIR: join(paths.dataDir, "python-runner"),
          PYTHON_RUNNER_TOOL_PATH: env.PYTHON_RUNNER_TOOL_PATH ?? toolPathFor(env.PATH ?? ""),
          ...pick(["PYTHON_RUNNER_SANDBOX", "UV_PYTHON_INSTALL_DIR", "SSL_CERT_FILE"]),
        },
      },
      logger,
    )
  : undefined;
if (pythonRunner) siblings.push(pythonRunner);
if (config?.coder && own("coder")) {
  siblings.push(
    startSibling(
      {
        name: "coder",
        entry: entry("coder"),
        onPortInUse: portInUse,
        env: {
          ...common,
          PORT: String(ports.coder),
          STAVROBOT_PORT_VARIABLE: "CODER_PORT",
          PLUGINS_DIR: pluginsDir,
          CODER_MODEL: config.coder.model,
          CODER_CREDENTIALS_DIR: join(paths.dataDir, "coder"),
          CODER_STATE_DIR: join(paths.dataDir, "coder-state"),
          ...(config.coder.apiKey ? { ANTHROPIC_API_KEY: config.coder.apiKey } : {}),
          ...(config.coder.baseUrl ? { ANTHROPIC_BASE_URL: config.coder.baseUrl } : {}),
          ...pick(["CODER_SANDBOX", "CLAUDE_PATH", "CODER_TIMEOUT_MS"]),
        },
      },
      logger,
    ),
  );
}
if (config?.signal && own("signal-bridge")) {
  siblings.push(
    startSibling(
      {
        name: "signal-bridge",
        entry: entry("signal-bridge"),
        onPortInUse: portInUse,
        env: {
          ...common,
          PORT: String(ports.signalBridge),
          STAVROBOT_PORT_VARIABLE: "SIGNAL_BRIDGE_PORT",
          SIGNAL_ACCOUNT: config.signal.account,
          SIGNAL_CLI_CONFIG_DIR: join(paths.dataDir, "signal-cli"),
          SIGNAL_BRIDGE_STATE_DIR: join(paths.dataDir, "signal-bridge"),
          ...pick(["SIGNAL_CLI_PATH", "SIGNAL_CLI_HTTP_PORT"]),
        },
      },
      logger,
    ),
  );
}
if (config?.whatsapp && own("whatsapp-bridge")) {
  siblings.push(
    startSibling(
      {
        name: "whatsapp-bridge",
        entry: entry("whatsapp-bridge"),
        onPortInUse: portInUse,
        env: {
          ...common,
          PORT: String(ports.whatsappBridge),
          STAVROBOT_PORT_VARIABLE: "WHATSAPP_BRIDGE_PORT",
          WHATSAPP_BRIDGE_STATE_DIR: join(paths.dataDir, "whatsapp-bridge"),
          ...(config.whatsapp.version ? { WHATSAPP_VERSION: config.whatsapp.version } : {}),
        },
      },
      logger,
    ),
  );
}

// A signal to the whole process group (Ctrl-C, systemd) reaches the siblings too: they stop on
// their own while the app closes, and must not be restarted meanwhile.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => siblings.forEach((sibling) => sibling.release()));
}

const stopSiblings = async () => {
  await Promise.all(siblings.map((sibling) => sibling.stop()));
};
// The app's own modules (most of this bundle) load while the siblings start: imported only now.
// Meanwhile, the embedded database's WebAssembly is read and compiled (the app awaits it, and
// answers its failure).
if (!usesServer(env)) loadPglite().catch(() => undefined);
const app: Promise<MainApp> = import("./run.js").then(({ main }) =>
  main(
    {
      ...env,
      PLUGIN_RUNNER_URL: env.PLUGIN_RUNNER_URL ?? `http://127.0.0.1:${ports.pluginRunner}`,
      PYTHON_RUNNER_URL: env.PYTHON_RUNNER_URL ?? `http://127.0.0.1:${ports.pythonRunner}`,
      CODER_URL: env.CODER_URL ?? `http://127.0.0.1:${ports.coder}`,
      SIGNAL_BRIDGE_URL: env.SIGNAL_BRIDGE_URL ?? `http://127.0.0.1:${ports.signalBridge}`,
      WHATSAPP_BRIDGE_URL: env.WHATSAPP_BRIDGE_URL ?? `http://127.0.0.1:${ports.whatsappBridge}`,
    },
    {
      beforeExit: stopSiblings,
      wake: pythonRunner ? { "python-runner": () => pythonRunner.wake() } : {},
      lock,
      ownSiblings,
    },
  ),
);
await app;

/** Closes what has started (the app once it is up), then exits with EXIT_IN_USE. */
async function stopStart(): Promise<never> {
  logger.error("stopping: a service of this start could not listen on its port (see above)");
  lock.markStopping();
  const running = await app.catch(() => undefined);
  await running?.close();
  await stopSiblings();
  lock.release();
  process.exit(EXIT_IN_USE);
}

/** Runs a step of the start; a refusal ends the process in one line. */
async function refuseOrRun<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    return exitForRefusal(error, env, logger);
  }
}

/** The config when it exists and parses; the app itself reports (and exits on) a bad one. */
function readConfig(): Readonly<AppConfig> | undefined {
  if (!existsSync(paths.configPath)) return undefined;
  try {
    return loadConfig(paths.configPath, env);
  } catch (error) {
    logger.debug("config not readable yet", { error: errorMessage(error) });
    return undefined;
  }
}

function pick(keys: string[]): Record<string, string> {
  return Object.fromEntries(keys.flatMap((key) => (env[key] ? [[key, env[key] as string]] : [])));
}
