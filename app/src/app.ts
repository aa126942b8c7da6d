import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import {
  ConfigError,
  closeServer,
  createHttpServer,
  createLogger,
  createServiceClient,
  errorMessage,
  listenOrRefuse,
  resolveInternalSecret,
  type Logger,
} from "@stavrobot/common";
import { ensureConfigFile, loadConfig, type AppConfig } from "./boot/config.js";
import { openDatabase, usesServer, type Database } from "./db/database.js";
import { restrictUmask, securePrivateState } from "./boot/private-state.js";
import type { InstanceLock } from "./boot/instance-lock.js";
import { parseAppEnv } from "./boot/env.js";
import { resolvePaths } from "./boot/paths.js";

export { resolvePaths, type AppPaths } from "./boot/paths.js";
import { migrate } from "./db/migrations.js";
import { InboxStore } from "./db/inbox.js";
import { listMemories, listScratchpadTitles } from "./db/knowledge.js";
import { messagesForInbox } from "./db/messages.js";
import { compactIfNeeded, SummaryBackoff } from "./agent/compaction.js";
import { createApiKeySource, describeModel, resolveModel } from "./model/model.js";
import { buildSystemPrompt, buildUserMessage } from "./agent/prompt.js";
import { tokenBudget } from "./agent/tokens.js";
import { TurnEngine } from "./agent/turn.js";
import { LoginFlows } from "./auth/login-flow.js";
import { createReauthHandler } from "./auth/reauth.js";
import { ConversationStore } from "./agent/conversation.js";
import { SystemPromptCache } from "./agent/prompt-cache.js";
import { StartupPhases } from "./boot/startup-phases.js";
import { APP_LAYOUT } from "./boot/app-dir.js";
import { warmUpFirstTurn } from "./agent/warm-up.js";
import { openModelClient } from "./model/client.js";
import { wakingClient } from "./local/sibling.js";
import { checkedIfOwn, type OwnSiblings } from "./local/own-sibling.js";
import { MessageQueue } from "./queue/queue.js";
import { InboxLifecycle } from "./queue/lifecycle.js";
import { ANSWER_EVENT, LiveEvents } from "./live/events.js";
import { buildServer } from "./server.js";
import { redactManagePluginsArguments } from "./tools/manage-plugins.js";
import { buildTools } from "./tools/registry.js";
import { FileAreas } from "./files/areas.js";
import { removeOldFiles } from "./files/housekeeping.js";
import { Scheduler } from "./scheduler/scheduler.js";
import { createTranscriber } from "./media/stt.js";
import { withTranscripts } from "./media/voice.js";
import { describePluginsForPrompt } from "./plugins/plugin-list.js";
import { PluginDetailCache } from "./plugins/detail-cache.js";
import type { AnyAgentTool } from "./tools/result.js";
import { isOwnerMessage, maySteer } from "./audience.js";
import { registerWebhook } from "./channels/telegram/registration.js";
import { OutboxFiles } from "./delivery/compose.js";
import { wireChannels } from "./channels/wiring.js";
import { UsageMeter, type UsageRecord } from "./usage/meter.js";
import { BackupSchedule } from "./db/backup-schedule.js";
import { createPriceList, spendOfAssistant, spendOfCall } from "./usage/pricing.js";

export interface AppOptions {
  env: NodeJS.ProcessEnv;
  logger?: Logger;
  /** Siblings `npm start` runs from their first use, by name: called before each request to one. */
  wake?: Readonly<Record<string, () => Promise<void>>>;
  /** The data directory's lock (run.ts): told where the servers listen once they do. */
  instanceLock?: InstanceLock;
  /** The siblings `npm start` started for this app: each is checked to be its own before use. */
  ownSiblings?: OwnSiblings;
}

export interface RunningApp {
  port: number;
  internalPort: number;
  config: Readonly<AppConfig>;
  configPath: string;
  db: Database;
  queue: MessageQueue;
  /** The in-memory conversation (tests that write the tables directly invalidate it). */
  conversation: ConversationStore;
  /** The owner's live events (`GET /api/events`). */
  live: LiveEvents;
  /** What model calls cost (counted at once, written after each turn). */
  meter: UsageMeter;
  close(): Promise<void>;
}

/** Everything `main` does, as a function tests can call: config, database, queue, servers. */
export async function startApp(options: AppOptions): Promise<RunningApp> {
  const env = options.env;
  const settings = parseAppEnv(env);
  const logger = options.logger ?? createLogger("app");
  const phases = new StartupPhases(logger);
  const { dataDir, configPath, secretFile, filesDir, uploadsDir, outboxDir, backupDir } =
    resolvePaths(settings);
  const pgliteDir = join(dataDir, "pglite");
  // Before anything is written: the config, the embedded database and stored files are the
  // owner's alone, even when plugin users share the machine (`npm start` as root).
  restrictUmask();
  const generated = ensureConfigFile(configPath, findFile("config.example.toml"));
  if (generated) {
    logger.warn(
      `First run: wrote ${configPath} with a generated password. Add your LLM provider key ` +
        `(apiKey = "...") to that file and restart. The password is in the file.`,
    );
  }
  const config = loadConfig(configPath);
  const internalSecret = resolveInternalSecret({ env, file: secretFile, create: true });
  const resolved = resolveModel(config);
  const model = resolved.model;
  const modelNote = describeModel(resolved, config);
  if (modelNote) logger[modelNote.level](modelNote.message, modelNote.fields);
  const keySource = createApiKeySource(config, { logger: logger.child("auth") });
  const { getApiKey, oauth } = keySource;
  // A key from authFile is not a start-up matter: a missing or broken login is fixed at /login
  // without a restart, and a turn meanwhile says so. Nothing here waits for a refresh.
  const startKey = oauth ? undefined : await getApiKey(model.provider);
  const notConfigured =
    oauth || startKey
      ? undefined
      : `The assistant has no LLM provider key yet. Add apiKey = "..." (or authFile) to ${configPath} and restart.`;
  if (notConfigured) logger.warn(notConfigured);
  // Meanwhile: the model's client and a connection to its host.
  const modelClient = openModelClient(model, startKey);
  const { callModels } = modelClient;
  phases.end("config");

  const embedded = !usesServer(env);
  const configDir = dirname(configPath);
  securePrivateState({
    dirs: [
      filesDir,
      uploadsDir,
      outboxDir,
      ...(isInside(dataDir, configDir) ? [configDir] : []),
      ...(embedded ? [pgliteDir] : []),
    ],
    // Stored files and the outbox's copies are private wherever they came from (older installs too).
    trees: [filesDir, outboxDir, ...(embedded ? [pgliteDir] : [])],
    files: [configPath, secretFile],
  });
  const created = embedded && !existsSync(join(pgliteDir, "PG_VERSION"));
  const db = await openDatabase({ env, dataDir: pgliteDir, logger });
  // PGlite writes the files of a database it creates with mode 666 whatever the umask (files it
  // creates later follow the umask): owner-only at once, not only behind their 700 directory.
  if (created) securePrivateState({ dirs: [], trees: [pgliteDir], files: [] });
  phases.end(`database (${db.kind})`);
  // PGlite creates a few files at run time with modes of its own (inside the 700 directory, so
  // unreachable by others); they are made owner-only again once it has closed.
  const cleanup: (() => Promise<void>)[] = [
    async () => {
      modelClient.close();
      await db.close();
      if (embedded) securePrivateState({ dirs: [], trees: [pgliteDir], files: [] });
    },
  ];
  try {
    const applied = await migrate(db);
    if (applied > 0) logger.info("database migrated", { applied });
    phases.end("migrations");
    const timezone = settings.TZ || Intl.DateTimeFormat().resolvedOptions().timeZone;
    const port = settings.PORT;
    const internalPort = settings.INTERNAL_PORT;
    const publicHostname = config.publicHostname ?? `http://localhost:${port}`;
    // Telegram sends it with every webhook call; a new one at each start.
    const webhookSecret = randomBytes(32).toString("base64url");
    const basePrompt = readFileSync(findFile("system-prompt.txt"), "utf8");
    const budget = tokenBudget(config.contextTokensK, model.contextWindow);
    const sibling = (name: string, baseUrl: string) =>
      wakingClient(
        checkedIfOwn(
          createServiceClient({
            baseUrl,
            bearer: internalSecret,
            timeoutMs: 60_000,
            logger: logger.child(name),
          }),
          name,
          options.ownSiblings,
        ),
        options.wake?.[name],
      );
    const pluginRunner = sibling("plugin-runner", settings.PLUGIN_RUNNER_URL);
    const pythonRunner = sibling("python-runner", settings.PYTHON_RUNNER_URL);
    const coder = sibling("coder", settings.CODER_URL);
    const details = new PluginDetailCache(pluginRunner);
    const transcriber = config.stt ? createTranscriber(config.stt) : undefined;
    const areas = new FileAreas(filesDir);
    await areas.ensure();
    const inbox = new InboxStore(db, db.relaxed);
    // After the servers have closed (cleanup runs newest first), before the database does.
    cleanup.unshift(() => inbox.flushSeen().catch(() => undefined));

    // What the owner's open consoles hear of at once (`GET /api/events`).
    const live = new LiveEvents();
    // Channels, the owner, the allowlist and the delivery outbox.
    const {
      ownerIds,
      ownerContact,
      allowlist,
      telegramApi,
      signalBridge,
      deliveries,
      worker,
      answers,
      tell,
      notices,
      mediaFetcher,
    } = await wireChannels({
      config,
      db,
      inbox,
      internalSecret,
      publicHostname,
      uploadsDir,
      signalBridge: () => sibling("signal-bridge", settings.SIGNAL_BRIDGE_URL),
      onKept: (answer) => live.publish(ANSWER_EVENT, answer),
      logger,
    });
    cleanup.unshift(() => worker.stop());
    // The queue exists once the turn engine does (firings only come after start(); sends only in turns).
    const late: { queue?: MessageQueue } = {};
    const scheduler = new Scheduler({
      db,
      timezone,
      accept: (entry) => void late.queue?.accept(entry),
      inbox,
      housekeeping: () => removeOldFiles(areas, inbox, logger.child("files")).then(() => undefined),
      logger: logger.child("scheduler"),
    });
    cleanup.unshift(async () => scheduler.stop());
    // The conversation stays in memory between turns (reloaded after anything that may change it).
    const conversation = new ConversationStore(db);
    // What model calls cost, and the budgets that stop them.
    // Usage rows are accounting: losing the last few to a server crash is acceptable.
    const meter = new UsageMeter(db.relaxed, config.budget ?? {}, timezone);
    await meter.start();
    const record = (entry: UsageRecord): void => {
      if (entry.inputTokens + entry.outputTokens + entry.cacheReadTokens + entry.cacheWriteTokens === 0)
        return;
      meter.record(entry);
    };
    const flushUsage = () =>
      meter
        .flush()
        .catch((error: unknown) => logger.warn("could not record usage", { error: errorMessage(error) }));
    cleanup.unshift(flushUsage);
    const refuseModelCall = (): string | undefined => meter.refusal()?.message;
    const prices = createPriceList(model);
    for (const helperModel of new Set([config.webSearch?.model, config.webFetch?.model])) {
      const template = helperModel && prices(helperModel).template;
      if (template)
        logger.info(`pi-ai does not list model "${helperModel}": web tools price it as "${template}"`);
    }
    const currentTurn = () => late.queue?.currentEntry;

    const tools: AnyAgentTool[] = buildTools({
      config,
      db,
      areas,
      timezone,
      publicHostname,
      pluginRunner,
      pythonRunner,
      coder,
      details,
      scheduler,
      ownerIds,
      modelPost: modelClient.post,
      modelCallMeter: (kind) => ({
        refuse: refuseModelCall,
        record: (modelId, usage, searches) =>
          record({
            kind,
            model: modelId,
            source: currentTurn()?.source,
            inboxId: currentTurn()?.id,
            ...spendOfCall(prices(modelId).cost, usage, searches),
          }),
      }),
      messaging: {
        allowlist,
        areas,
        outboxFiles: new OutboxFiles(outboxDir),
        store: deliveries,
        worker,
        currentInboxId: () => late.queue?.currentEntryId,
      },
    });

    // The same system prompt every turn until a part of it changes.
    const systemPrompt = new SystemPromptCache({
      knowledge: async () => ({
        memories: await listMemories(db),
        scratchpadTitles: await listScratchpadTitles(db),
      }),
      plugins: () => describePluginsForPrompt(pluginRunner, logger.child("plugins")),
      compose: ({ knowledge, plugins }) =>
        buildSystemPrompt({
          basePrompt,
          toolNames: tools.map((tool) => tool.name),
          customPrompt: config.customPrompt,
          publicHostname,
          timezone,
          plugins,
          ...knowledge,
        }),
    });
    // The subscription login (authFile): renewed in the background, completed on the login page; a
    // 401 removes it and sends the owner the login link.
    const loginUrl = `${publicHostname}/login`;
    const login = new LoginFlows({ provider: model.provider, keys: oauth, logger: logger.child("login") });
    oauth?.start(model.provider);
    cleanup.unshift(async () => {
      login.close();
      oauth?.stop();
    });
    const onProviderError = oauth
      ? createReauthHandler({
          provider: model.provider,
          keys: oauth,
          loginUrl,
          owner: ownerContact,
          tell,
          notices,
          logger: logger.child("login"),
        })
      : undefined;
    // The inbox row's life: accepted, started with its user message, finished with the turn's
    // last messages and usage rows in one commit.
    const lifecycle = new InboxLifecycle({ inbox, conversation, meter });
    const engine = new TurnEngine({
      db,
      stream: callModels,
      conversation,
      lifecycle,
      model,
      thinkingLevel: config.thinkingLevel,
      maxTokens: config.maxTokens,
      maxToolRounds: config.maxToolRounds,
      tools: () => tools,
      systemPrompt: () => systemPrompt.get(),
      getApiKey,
      budget,
      logger: logger.child("agent"),
      // Read when a turn finds no key: with authFile, it says why and where to log in.
      get missingKeyMessage() {
        return oauth
          ? oauth.missingKeyMessage(model.provider, loginUrl)
          : (notConfigured ?? "No API key for the configured provider.");
      },
      onProviderError,
      redactors: { manage_plugins: redactManagePluginsArguments },
      refuseModelCall,
      afterTool: (name, args) => staleAfterTool(name, args, { conversation, systemPrompt, inbox }),
      onModelCall: (inboxId, message) =>
        record({
          kind: "turn",
          model: message.model,
          source: currentTurn()?.source,
          inboxId,
          ...spendOfAssistant(message),
        }),
    });
    // When a failing summariser is next asked (compactions meanwhile truncate).
    const summaryBackoff = new SummaryBackoff();
    const queue = new MessageQueue({
      lifecycle,
      engine,
      answers,
      buildUserMessage: async (entry) => {
        // A coding task's result usually announces a plugin the coder just wrote.
        if (entry.source === "coder") systemPrompt.invalidate("plugins");
        // Files of a Telegram message are fetched now, not when Telegram was answered.
        const payload = mediaFetcher ? await mediaFetcher.resolve(entry) : entry.payload;
        return buildUserMessage(
          {
            text: await withTranscripts(payload.message, payload.attachments, transcriber),
            attachments: payload.attachments,
            source: entry.source,
            // The owner is "owner" whichever channel they write from.
            sender: isOwnerMessage(entry, ownerContact) ? null : entry.sender,
            receivedAt: entry.receivedAt,
          },
          timezone,
        );
      },
      messagesForInbox: (id) => messagesForInbox(db, id),
      reloadConversation: () => conversation.invalidate(),
      afterTurn: async () => {
        await flushUsage();
        await compactIfNeeded({
          conversation,
          model,
          complete: (callModel, context, callOptions) =>
            callModels(callModel, context, callOptions ?? {}).result(),
          getApiKey,
          budget,
          backoff: summaryBackoff,
          logger: logger.child("compaction"),
          refuseModelCall,
          onModelCall: (message) =>
            record({ kind: "compaction", model: message.model, ...spendOfAssistant(message) }),
        });
      },
      maySteer: (running, incoming) => maySteer(running, incoming, ownerContact),
      waitForDatabase: () => db.waitUntilAvailable(),
      budgetRefusal: () => meter.refusal(),
      maxRetries: config.queue.maxRetries,
      retryDelayMs: config.queue.retryDelaySeconds * 1000,
      logger: logger.child("queue"),
    });

    late.queue = queue;

    // The embedded database's daily backup, taken here while it runs (a server has pg-backup).
    const backups = db.embedded
      ? new BackupSchedule({
          files: db.embedded,
          destDir: backupDir,
          intervalMs: settings.BACKUP_INTERVAL_SECONDS * 1000,
          logger: logger.child("backup"),
        })
      : undefined;
    if (backups) cleanup.unshift(() => backups.stop());

    // For the admin UI's home page: the siblings this configuration uses, and the webhook's state.
    const services = {
      "plugin-runner": pluginRunner,
      "python-runner": pythonRunner,
      ...(config.coder ? { coder } : {}),
      ...(signalBridge ? { "signal-bridge": signalBridge } : {}),
    };
    const listeners = buildServer({
      queue,
      inbox,
      live,
      db,
      uploadsDir,
      pluginRunner,
      details,
      pluginsChanged: () => systemPrompt.invalidate("plugins"),
      notReady: () => notConfigured,
      allowlist,
      tell,
      telegram: telegramApi ? { secret: webhookSecret } : undefined,
      signalBridge,
      login,
      usage: { db, meter, timezone },
      web: {
        services,
        telegramWebhook: telegramApi && {
          webhookInfo: () => telegramApi.call("getWebhookInfo", {}),
          webhookUrl: `${publicHostname}/telegram/webhook`,
        },
        publicHostname,
      },
      password: config.password,
      internalSecret,
      backup: backups && (() => backups.backup()),
      logger: logger.child("http"),
    });
    // Before listening: the first turn finds the conversation, the provider's library and the
    // connections ready, and a turn rehearsed; the system prompt is composed in the background once
    // the plugin-runner answers. Then answers a crash kept from their audience, then unfinished
    // messages, ahead of anything new.
    phases.end("services and state");
    const priming = new AbortController();
    cleanup.unshift(async () => priming.abort());
    await warmUpFirstTurn({
      db,
      timezone,
      model,
      client: modelClient,
      conversation,
      inbox,
      budget,
      systemPrompt,
      runnerAnswers: () =>
        pluginRunner.request("GET", "/health", { retries: 0, timeoutMs: 1_000 }).then(
          () => true,
          () => false,
        ),
      signal: priming.signal,
      phases,
      logger,
    });
    const handed = await answers.recover();
    if (handed > 0) logger.info("handed over earlier answers", { count: handed });
    const resumed = await queue.recover();
    if (resumed > 0) logger.info("resuming unfinished messages", { count: resumed });
    await scheduler.start();
    phases.end("recovery and scheduler");
    // Receiving a request is bounded (a trickled body cannot hold a socket); answering a turn is not.
    const external = createHttpServer(listeners.external);
    const internal = createHttpServer(listeners.internal);
    const host = settings.HOST;
    const boundPort = await listenOrRefuse(external, { service: "app", port, host, variable: "PORT" });
    cleanup.unshift(() => closeServer(external));
    const internalHost = settings.INTERNAL_HOST ?? host;
    const boundInternal = await listenOrRefuse(internal, {
      service: "app (internal)",
      port: internalPort,
      host: internalHost,
      variable: "INTERNAL_PORT",
    });
    cleanup.unshift(() => closeServer(internal));
    // Open event streams end first, so closing the external server does not wait for them.
    cleanup.unshift(async () => live.close());
    options.instanceLock?.update({ port: boundPort, internalPort: boundInternal, internalHost });
    worker.start();
    if (backups && settings.BACKUP_INTERVAL_SECONDS > 0) {
      void backups.start().catch((error: unknown) => {
        logger.error("could not schedule backups", { error: errorMessage(error) });
      });
    }
    if (telegramApi) {
      const stop = registerWebhook(telegramApi, {
        url: `${publicHostname}/telegram/webhook`,
        secret: webhookSecret,
        logger: logger.child("telegram"),
      });
      cleanup.unshift(async () => stop());
    }
    phases.end("listening");
    logger.info("listening", {
      startupMs: phases.total(),
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
      conversation,
      live,
      meter,
      close: () => closeAll(cleanup),
    };
  } catch (error) {
    await closeAll(cleanup);
    throw error;
  }
}

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel);
}

async function closeAll(cleanup: (() => Promise<void>)[]): Promise<void> {
  for (const step of cleanup) await step().catch(() => {});
}

/** Files shipped at the repo root (or copied beside the build in the container image). */
function findFile(name: string): string {
  const root = APP_LAYOUT.rootDir;
  const candidates = [join(process.cwd(), name), join(root, name), join(root, "..", name)];
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

/**
 * What a tool call may have changed behind the in-memory copies: SQL on the conversation, the
 * inbox or the knowledge tables, the knowledge tool, a plugin installed or removed.
 */
function staleAfterTool(
  name: string,
  args: unknown,
  caches: { conversation: ConversationStore; systemPrompt: SystemPromptCache<unknown>; inbox: InboxStore },
): void {
  if (name === "execute_sql") {
    // Whatever the SQL says: the conversation is checked against the tables' row versions before
    // its next use, and the knowledge in the prompt read again.
    caches.conversation.recheck();
    caches.systemPrompt.invalidate("knowledge");
    // The id drawn ahead for the next message may no longer be free (a sequence reset).
    const sql = String((args as { query?: unknown } | undefined)?.query ?? "");
    if (/\binbox\b/i.test(sql)) caches.inbox.forgetAhead();
  } else if (name === "manage_knowledge") {
    caches.systemPrompt.invalidate("knowledge");
  } else if (name === "manage_plugins") {
    caches.systemPrompt.invalidate("plugins");
  }
}
