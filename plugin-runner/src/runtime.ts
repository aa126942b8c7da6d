import { chmod, mkdir, readdir, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { PLUGIN_NAME_PATTERN, createServiceClient, errorMessage } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import { BackgroundTasks } from "./background.js";
import { BundleStore } from "./bundles.js";
import type { ToolEnvConfig } from "./config.js";
import { DEFAULT_TOOL_PATH } from "./config.js";
import type { Limits } from "./executor.js";
import { DEFAULT_LIMITS, Executor } from "./executor.js";
import { Lifecycle } from "./lifecycle.js";
import { Outbox } from "./outbox.js";
import type { ServerDeps } from "./server.js";
import { ToolService } from "./tool-service.js";
import type { Isolation } from "./users.js";
import { createIsolation } from "./users.js";

export interface RunnerOptions {
  pluginsDir: string;
  cacheDir: string;
  /** Holds the outbox. */
  stateDir: string;
  /** Parent of the per-run temp directories. */
  runsDir: string;
  appInternalUrl: string;
  secret: string;
  logger: Logger;
  toolEnv?: ToolEnvConfig;
  limits?: Partial<Limits>;
  /** Per-plugin users; defaults to "running as root". */
  isolation?: boolean;
  outboxBaseDelayMs?: number;
  outboxMaxDelayMs?: number;
  gitTimeoutMs?: number;
}

export interface Runner {
  readonly deps: ServerDeps;
  readonly outbox: Outbox;
  readonly background: BackgroundTasks;
  readonly isolation: Isolation;
  /** Prepares directories, adopts existing plugins and re-sends what the outbox holds. */
  start(): Promise<void>;
  /** Stops deliveries; pending results stay on disk for the next start. */
  stop(): Promise<void>;
  /** Resolves once finished runs' temporary directories are removed (done after answering). */
  settle(): Promise<void>;
}

/** Wires the runner's parts together. Paths must be absolute. */
export function createRunner(options: RunnerOptions): Runner {
  const logger = options.logger;
  const limits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const enabled = options.isolation ?? process.getuid?.() === 0;
  const isolation = createIsolation({ enabled, logger: logger.child("users") });
  const toolEnv = options.toolEnv ?? { path: DEFAULT_TOOL_PATH };
  const bundles = new BundleStore(options.pluginsDir, logger.child("bundles"));
  const background = new BackgroundTasks(logger);
  const app = createServiceClient({ baseUrl: options.appInternalUrl, bearer: options.secret, retries: 0 });
  const outbox = new Outbox({
    dir: join(options.stateDir, "outbox"),
    app,
    logger: logger.child("outbox"),
    baseDelayMs: options.outboxBaseDelayMs,
    maxDelayMs: options.outboxMaxDelayMs,
  });
  const executor = new Executor({
    cacheDir: options.cacheDir,
    runsDir: options.runsDir,
    isolation,
    toolEnv,
    limits,
    logger: logger.child("run"),
  });
  const gitEnv: Record<string, string> = {
    PATH: process.env.PATH ?? DEFAULT_TOOL_PATH,
    HOME: process.env.HOME ?? "/root",
  };
  if (toolEnv.sslCertFile) gitEnv.SSL_CERT_FILE = toolEnv.sslCertFile;
  const lifecycle = new Lifecycle({
    pluginsDir: options.pluginsDir,
    cacheDir: options.cacheDir,
    bundles,
    executor,
    isolation,
    outbox,
    background,
    logger: logger.child("lifecycle"),
    gitEnv,
    gitTimeoutMs: options.gitTimeoutMs ?? 120_000,
  });
  const tools = new ToolService({ bundles, executor, outbox, background, logger: logger.child("tools") });
  const deps: ServerDeps = { secret: options.secret, logger, bundles, tools, lifecycle };

  return {
    deps,
    outbox,
    background,
    isolation,
    async start() {
      const { pluginsDir, cacheDir, runsDir, stateDir } = options;
      for (const dir of [pluginsDir, cacheDir, runsDir]) await mkdir(dir, { recursive: true, mode: 0o711 });
      await mkdir(stateDir, { recursive: true, mode: 0o700 });
      if (enabled) {
        // Plugin users may pass through these directories but not list them.
        for (const dir of [pluginsDir, cacheDir, runsDir]) {
          await chmod(dir, 0o711);
          await warnIfUnreachable(dir, logger);
        }
        await chmod(stateDir, 0o700);
      } else {
        logger.warn(
          "Plugin isolation is OFF: the runner is not root, so every plugin runs as the current user and can read the others' files and configuration. Run it as root (as the container does) to isolate plugins.",
        );
      }
      await removeEntries(pluginsDir, (name) => name.startsWith(".tmp-install-"));
      await removeEntries(runsDir, () => true);
      if (enabled) await adoptPlugins(pluginsDir, executor, logger);
      await outbox.start();
    },
    async stop() {
      await outbox.stop();
      await executor.settle();
    },
    settle: () => executor.settle(),
  };
}

async function removeEntries(dir: string, match: (name: string) => boolean): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (match(name)) await rm(join(dir, name), { recursive: true, force: true });
  }
}

/** Plugins copied in by hand, or from before a restart: make sure each has its user and owns its files. */
async function adoptPlugins(pluginsDir: string, executor: Executor, logger: Logger): Promise<void> {
  const entries = await readdir(pluginsDir, { withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isDirectory() || !PLUGIN_NAME_PATTERN.test(entry.name)) continue;
    try {
      await executor.preparePlugin(join(pluginsDir, entry.name), entry.name);
    } catch (error) {
      logger.error("could not prepare plugin", { plugin: entry.name, error: errorMessage(error) });
    }
  }
}

/** Plugin users need execute permission on every parent of the plugin, cache and run directories. */
async function warnIfUnreachable(dir: string, logger: Logger): Promise<void> {
  for (let current = dirname(dir); ; current = dirname(current)) {
    const info = await stat(current).catch(() => undefined);
    if (info && (info.mode & 0o001) === 0) {
      logger.error(
        `plugin users cannot reach ${dir}: ${current} is not searchable by other users, so plugin tools ` +
          `will fail to start. Put the data directory somewhere others can traverse (set DATA_DIR, or ` +
          `PLUGINS_DIR / PLUGIN_CACHE_DIR / PLUGIN_RUNS_DIR), or run: chmod o+x ${current}`,
      );
      return;
    }
    if (dirname(current) === current) return;
  }
}
