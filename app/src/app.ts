import { createServer } from "node:http";
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  ConfigError,
  closeServer,
  createLogger,
  createServiceClient,
  listen,
  resolveInternalSecret,
  type Logger,
} from "@stavrobot/common";
import { ensureConfigFile, loadConfig, type AppConfig } from "./config.js";
import { openDatabase, type Database } from "./db/database.js";
import { migrate } from "./db/migrations.js";
import { InboxStore } from "./db/inbox.js";
import { listMemories, listScratchpadTitles } from "./db/knowledge.js";
import { messagesForInbox } from "./db/messages.js";
import { compactIfNeeded } from "./agent/compaction.js";
import { createApiKeySource, resolveModel } from "./agent/model.js";
import { buildSystemPrompt, buildUserMessage } from "./agent/prompt.js";
import { tokenBudget } from "./agent/tokens.js";
import { TurnRunner } from "./agent/turn.js";
import { MessageQueue } from "./queue.js";
import { buildServer } from "./server.js";
import { createExecuteSqlTool } from "./tools/execute-sql.js";
import { createManageKnowledgeTool } from "./tools/manage-knowledge.js";
import { createManagePluginsTool, redactManagePluginsArguments } from "./tools/manage-plugins.js";
import { createRunPluginTool } from "./tools/run-plugin-tool.js";
import { describePluginsForPrompt } from "./plugins/plugin-list.js";
import { BundleDetailCache } from "./plugins/detail-cache.js";
import type { AnyAgentTool } from "./tools/result.js";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export interface AppOptions {
  env: NodeJS.ProcessEnv;
  logger?: Logger;
}

export interface RunningApp {
  port: number;
  internalPort: number;
  config: Readonly<AppConfig>;
  configPath: string;
  db: Database;
  queue: MessageQueue;
  close(): Promise<void>;
}

export interface AppPaths {
  dataDir: string;
  configPath: string;
  secretFile: string;
  /** Files the model may hand to plugins: uploads and plugin outputs live here. */
  filesDir: string;
  uploadsDir: string;
}

/** Where everything lives, from DATA_DIR, CONFIG_PATH and STAVROBOT_INTERNAL_SECRET_FILE. */
export function resolvePaths(env: NodeJS.ProcessEnv): AppPaths {
  const dataDir = resolve(env.DATA_DIR ?? "data");
  const configPath = resolve(env.CONFIG_PATH ?? join(dataDir, "main", "config.toml"));
  const filesDir = join(dataDir, "files");
  return {
    dataDir,
    configPath,
    secretFile: resolve(env.STAVROBOT_INTERNAL_SECRET_FILE ?? join(dirname(configPath), "internal-secret")),
    filesDir,
    uploadsDir: join(filesDir, "uploads"),
  };
}

/** Everything `main` does, as a function tests can call: config, database, queue, servers. */
export async function startApp(options: AppOptions): Promise<RunningApp> {
  const env = options.env;
  const logger = options.logger ?? createLogger("app");
  const { dataDir, configPath, secretFile, filesDir, uploadsDir } = resolvePaths(env);
  const generated = ensureConfigFile(configPath, findFile("config.example.toml"));
  if (generated) {
    logger.warn(
      `First run: wrote ${configPath} with a generated password. Add your LLM provider key ` +
        `(apiKey = "...") to that file and restart. The password is in the file.`,
    );
  }
  const config = loadConfig(configPath);
  const internalSecret = resolveInternalSecret({ env, file: secretFile, create: true });
  const model = resolveModel(config);
  const getApiKey = createApiKeySource(config);
  const notConfigured = (await getApiKey(model.provider))
    ? undefined
    : `The assistant has no LLM provider key yet. Add apiKey = "..." (or authFile) to ${configPath} and restart.`;
  if (notConfigured) logger.warn(notConfigured);

  const db = await openDatabase({ env, dataDir: join(dataDir, "pglite"), logger });
  const cleanup: (() => Promise<void>)[] = [() => db.close()];
  try {
    const applied = await migrate(db);
    if (applied > 0) logger.info("database migrated", { applied });
    mkdirSync(uploadsDir, { recursive: true });
    const timezone = env.TZ || Intl.DateTimeFormat().resolvedOptions().timeZone;
    const port = Number(env.PORT ?? 3000);
    const internalPort = Number(env.INTERNAL_PORT ?? 3001);
    const publicHostname = config.publicHostname ?? `http://localhost:${port}`;
    const basePrompt = readFileSync(findFile("system-prompt.txt"), "utf8");
    const budget = tokenBudget(config.contextTokensK, model.contextWindow);
    const pluginRunner = createServiceClient({
      baseUrl: env.PLUGIN_RUNNER_URL ?? "http://127.0.0.1:3003",
      bearer: internalSecret,
      timeoutMs: 60_000,
      retries: 0,
      logger: logger.child("plugin-runner"),
    });
    const details = new BundleDetailCache(pluginRunner);
    const tools: AnyAgentTool[] = [
      createExecuteSqlTool({ db }),
      createManageKnowledgeTool({ db }),
      createManagePluginsTool({ pluginRunner, details }),
      createRunPluginTool({ pluginRunner, filesDir, details }),
    ];

    const runner = new TurnRunner({
      db,
      model,
      thinkingLevel: config.thinkingLevel,
      maxTokens: config.maxTokens,
      tools: () => tools,
      systemPrompt: async () =>
        buildSystemPrompt({
          basePrompt,
          customPrompt: config.customPrompt,
          publicHostname,
          timezone,
          plugins: await describePluginsForPrompt(pluginRunner, logger.child("plugins")),
          memories: await listMemories(db),
          scratchpadTitles: await listScratchpadTitles(db),
        }),
      getApiKey,
      budget,
      logger: logger.child("agent"),
      missingKeyMessage: notConfigured ?? "No API key for the configured provider.",
      redactors: { manage_plugins: redactManagePluginsArguments },
    });
    const inbox = new InboxStore(db);
    const queue = new MessageQueue({
      inbox,
      runner,
      buildUserMessage: (entry) =>
        buildUserMessage(
          {
            text: entry.payload.message,
            attachments: entry.payload.attachments,
            source: entry.source,
            sender: entry.sender,
            receivedAt: entry.receivedAt,
          },
          timezone,
        ),
      messagesForInbox: (id) => messagesForInbox(db, id),
      afterTurn: async () => {
        await compactIfNeeded({ db, model, getApiKey, budget, logger: logger.child("compaction") });
      },
      notify: async () => {},
      maxRetries: config.queue.maxRetries,
      retryDelayMs: config.queue.retryDelaySeconds * 1000,
      logger: logger.child("queue"),
    });

    const listeners = buildServer({
      queue,
      inbox,
      uploadsDir,
      notReady: () => notConfigured,
      password: config.password,
      internalSecret,
      logger: logger.child("http"),
    });
    // Before listening: unfinished messages go first, ahead of anything new.
    const resumed = await queue.recover();
    if (resumed > 0) logger.info("resuming unfinished messages", { count: resumed });
    const external = createServer(listeners.external);
    const internal = createServer(listeners.internal);
    // Turns can take minutes; the client decides when to give up.
    for (const server of [external, internal]) server.requestTimeout = 0;
    const host = env.HOST ?? "127.0.0.1";
    const boundPort = await listen(external, port, host);
    cleanup.unshift(() => closeServer(external));
    const boundInternal = await listen(internal, internalPort, env.INTERNAL_HOST ?? host);
    cleanup.unshift(() => closeServer(internal));
    logger.info("listening", {
      port: boundPort,
      internalPort: boundInternal,
      database: db.kind,
      model: `${model.provider}/${model.id}`,
    });

    return {
      port: boundPort,
      internalPort: boundInternal,
      config,
      configPath,
      db,
      queue,
      close: () => closeAll(cleanup),
    };
  } catch (error) {
    await closeAll(cleanup);
    throw error;
  }
}

async function closeAll(cleanup: (() => Promise<void>)[]): Promise<void> {
  for (const step of cleanup) await step().catch(() => {});
}

/** Files shipped at the repo root (or copied beside the build in the container image). */
function findFile(name: string): string {
  const candidates = [join(process.cwd(), name), join(repoRoot, name), join(repoRoot, "..", name)];
  const found = candidates.find((path) => {
    try {
      readFileSync(path);
      return true;
    } catch {
      return false;
    }
  });
  if (!found) throw new ConfigError(`Cannot find ${name} (looked in ${candidates.join(", ")})`);
  return found;
}
