import { readFileSync } from "node:fs";
import {
  closeServer,
  createHttpServer,
  createLogger,
  errorMessage,
  listenOrRefuse,
  resolveInternalSecret,
  type Logger,
} from "@stavrobot/common";
import { warmUpFirstTurn } from "./agent/warm-up.js";
import { wireLogin } from "./auth/wiring.js";
import { Cleanup } from "./boot/cleanup.js";
import { ensureConfigFile, loadConfig, type AppConfig } from "./boot/config.js";
import { McpConfigWatch, writeMcpServersFile } from "./boot/mcp-servers.js";
import { providerFields } from "./boot/provider-choice.js";
import { ProviderInUse, RESTART_TO_USE, withRestartNeeded } from "./boot/provider-in-use.js";
import { parseAppEnv } from "./boot/env.js";
import { findFile } from "./boot/files.js";
import type { InstanceLock } from "./boot/instance-lock.js";
import { resolvePaths } from "./boot/paths.js";
import { restrictUmask } from "./boot/private-state.js";
import { StartupPhases } from "./boot/startup-phases.js";
import { openState } from "./boot/state.js";
import { wireChannels } from "./channels/wiring.js";
import { BackupSchedule } from "./db/backup-schedule.js";
import type { Database } from "./db/database.js";
import { InboxStore } from "./db/inbox.js";
import { migrate } from "./db/migrations.js";
import { FileAreas } from "./files/areas.js";
import { removeOldFiles } from "./files/housekeeping.js";
import { LiveEvents } from "./live/events.js";
import { keepForOwner, withdrawFromOwner } from "./live/notifications.js";
import { NotificationStore } from "./db/notifications.js";
import type { OwnSiblings } from "./local/own-sibling.js";
import { wireSiblings } from "./local/wiring.js";
import { createTranscriber } from "./media/stt.js";
import { wireModel } from "./model/wiring.js";
import { providerCheck, type ProviderCheck } from "./doctor/provider.js";
import { embeddingsCheck } from "./doctor/embeddings.js";
import { wireEmbeddings } from "./embeddings/wiring.js";
import { PluginDetailCache } from "./plugins/detail-cache.js";
import type { ConversationStore } from "./agent/conversation.js";
import { CurrentTurn } from "./queue/current-turn.js";
import type { MessageQueue } from "./queue/queue.js";
import { wireTurn } from "./queue/wiring.js";
import { Scheduler } from "./scheduler/scheduler.js";
import { buildServer } from "./server.js";
import { wireTools } from "./tools/wiring.js";
import { SkillStore } from "./skills/store.js";
import { describeSkillsForPrompt } from "./skills/prompt.js";
import { seedOwner } from "./db/people.js";
import type { UsageMeter } from "./usage/meter.js";
import { wireUsage } from "./usage/wiring.js";
import { PromptCommands } from "./plugins/prompt-command.js";
import { QuestionCommands } from "./plugins/questions.js";
import { ownerDestination } from "./audience.js";

export { resolvePaths, type AppPaths } from "./boot/paths.js";

export interface AppOptions {
  env: NodeJS.ProcessEnv;
  logger?: Logger;
  /** Siblings `npm start` runs from their first use, by name: called before each request to one. */
  wake?: Readonly<Record<string, () => Promise<void>>>;
  /** The data directory's lock (run.ts): told where the servers listen once they do. */
  instanceLock?: InstanceLock;
  /** The siblings `npm start` started for this app: each is checked to be its own before use. */
  ownSiblings?: OwnSiblings;
  /**
   * Closes this app and starts it again in the same process (run.ts), config.toml read again: the
   * Settings page offers it once a provider it saved waits for a restart.
   */
  restart?: () => void;
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

/**
 * Everything `main` does, as a function tests can call, in the order a start does it: the
 * config and the model, the database, then each wing (siblings, channels, usage, tools, the
 * turn), the servers' routes, the first turn's warm-up, recovery, and listening.
 */
export async function startApp(options: AppOptions): Promise<RunningApp> {
  const env = options.env;
  const settings = parseAppEnv(env);
  const logger = options.logger ?? createLogger("app");
  const phases = new StartupPhases(logger);
  const paths = resolvePaths(settings);
  // Before anything is written: the config, the embedded database and stored files are the
  // owner's alone, even when plugin users share the machine (`npm start` as root).
  restrictUmask();
  if (ensureConfigFile(paths.configPath, findFile("config.example.toml"))) {
    logger.warn(
      `First run: wrote ${paths.configPath} with a generated password. Set your LLM provider on the ` +
        `Settings page (/settings), or add its key (apiKey = "...") to that file and restart. The password is in the file.`,
    );
  }
  const config = loadConfig(paths.configPath, env);
  const internalSecret = resolveInternalSecret({ env, file: paths.secretFile, create: true });
  await writeMcpServersFile(paths, config);
  // Meanwhile: the model's client and a connection to its host.
  const model = await wireModel({ config, configPath: paths.configPath, logger });
  phases.end("config");

  const cleanup = new Cleanup();
  cleanup.add(() => model.client.close());
  try {
    const db = await openState({ env, paths, cleanup, logger });
    phases.end(`database (${db.kind})`);
    const applied = await migrate(db);
    if (applied > 0) logger.info("database migrated", { applied });
    phases.end("migrations");

    const timezone = settings.TZ || Intl.DateTimeFormat().resolvedOptions().timeZone;
    const publicHostname = config.publicHostname ?? `http://localhost:${settings.PORT}`;
    const siblings = wireSiblings({
      settings,
      internalSecret,
      wake: options.wake,
      own: options.ownSiblings,
      logger,
    });
    const details = new PluginDetailCache(siblings.pluginRunner);
    const areas = new FileAreas(paths.filesDir);
    await areas.ensure();
    const inbox = new InboxStore(db, db.relaxed);
    // After the servers have closed, before the database does.
    cleanup.add(() => inbox.flushSeen().catch(() => undefined));
    // What the owner's open consoles hear of at once (`GET /api/events`).
    const live = new LiveEvents();
    // Each answer kept for the owner is listed until they dismiss it, then the consoles hear of it.
    const notifications = new NotificationStore(db);
    const keepAnswer = keepForOwner({ notifications, live, logger: logger.child("notifications") });
    const channels = await wireChannels({
      config,
      db,
      inbox,
      internalSecret,
      publicHostname,
      uploadsOf: (agentId) => areas.of(agentId).uploads,
      signalBridge: siblings.signalBridge,
      whatsappBridge: siblings.whatsappBridge,
      onKept: (answer) => void keepAnswer(answer),
      onDeliveredLater: withdrawFromOwner({ notifications, inbox, live }),
      logger,
    });
    cleanup.add(() => channels.worker.stop());
    const scheduler = new Scheduler({
      db,
      timezone,
      inbox,
      housekeeping: () => removeOldFiles(areas, inbox, logger.child("files")).then(() => undefined),
      logger: logger.child("scheduler"),
    });
    cleanup.add(() => scheduler.stop());
    const currentTurn = new CurrentTurn();
    const usage = await wireUsage({ db, config, timezone, model: model.model, currentTurn, logger });
    cleanup.add(usage.flush);
    // The owner's record as [owner] says at this start (their identities go to the main agent).
    await seedOwner(db, {
      name: config.owner?.name ?? "owner",
      identities: (["telegram", "signal", "whatsapp", "email"] as const).flatMap((service) => {
        const identifier = channels.ownerIds[service];
        return identifier ? [{ service, identifier }] : [];
      }),
    });
    // Search by meaning ([embeddings]): its index is kept in the background once the app listens.
    const embeddings = wireEmbeddings({
      config,
      db,
      logger: logger.child("embeddings"),
      intervalMs: settings.EMBEDDINGS_INTERVAL_SECONDS * 1000,
    });
    if (embeddings) cleanup.add(() => embeddings.worker.stop());
    // The skills the owner installs: their files beside the data, their approvals signed.
    const skillStore = new SkillStore(db, paths.skillsDir, internalSecret);
    const skillSources = { allowPrivateSources: config.skills.allowPrivateSources };
    // One agent's message to another is saved in the inbox for it; the queue is made below.
    const late: { queue?: MessageQueue } = {};
    const tools = wireTools({
      enqueueAgentMessage: async ({ from, fromLabel, to, text }) => {
        if (!late.queue) throw new Error("the queue is not running yet");
        await late.queue.submit("agent", String(from), {
          message: text,
          attachments: [],
          agentId: to,
          from: fromLabel,
        });
      },
      config,
      db,
      areas,
      timezone,
      publicHostname,
      siblings,
      details,
      scheduler,
      channels,
      deliveryFilesDir: paths.deliveryFilesDir,
      modelPost: model.client.post,
      usage,
      currentTurn,
      ...(embeddings ? { semantic: embeddings.search } : {}),
      skills: {
        store: skillStore,
        sources: skillSources,
        waiting: (text) => channels.notices.addNotice("skills", "(a skill waits for your approval)", text),
      },
    });
    const login = wireLogin({ model, publicHostname, channels, logger });
    cleanup.add(() => login.close());
    const providerInUse = new ProviderInUse(paths.configPath, providerFields(config));
    // Once a provider saved on the Settings page waits for a restart, that is what is missing:
    // said on /chat, Home and to whoever a channel's turn answers.
    const notReady = () =>
      model.notConfigured && (providerInUse.restartNeeded() ? RESTART_TO_USE : model.notConfigured);
    const turn = wireTurn({
      config,
      db,
      timezone,
      publicHostname,
      basePrompt: readFileSync(findFile("system-prompt.txt"), "utf8"),
      model,
      usage,
      tools,
      inbox,
      channels,
      pluginRunner: siblings.pluginRunner,
      details,
      ...(embeddings && config.memory?.autoRecall !== false ? { recallSearch: embeddings.search } : {}),
      transcriber: config.stt ? createTranscriber(config.stt) : undefined,
      currentTurn,
      login,
      notReady,
      internalSecret,
      skillsForPrompt: async () =>
        describeSkillsForPrompt(await skillStore.approved(), {
          count: config.skills.promptCount,
          bytes: config.skills.promptBytes,
        }),
      logger,
    });
    late.queue = turn.queue;
    const backups = db.embedded
      ? new BackupSchedule({
          files: db.embedded,
          destDir: paths.backupDir,
          intervalMs: settings.BACKUP_INTERVAL_SECONDS * 1000,
          logger: logger.child("backup"),
        })
      : undefined;
    if (backups) cleanup.add(() => backups.stop());

    const { signalBridge, whatsappBridge } = channels;
    // [mcpServers] edited while the app runs (by hand, `npm run mcp:import`) takes effect now.
    const mcpConfig = new McpConfigWatch({
      configPath: paths.configPath,
      paths,
      env,
      logger: logger.child("config"),
      changed: () => {
        details.forget();
        turn.systemPrompt.invalidate("plugins");
      },
    });
    mcpConfig.start();
    cleanup.add(() => mcpConfig.stop());
    const mcpConfigProblem = () => mcpConfig.problem;
    // A server without a model list is checked with a one-token request, sent once per start.
    const probesAnswered = new Map<string, ProviderCheck>();
    const listeners = buildServer({
      queue: turn.queue,
      inbox,
      live,
      progress: turn.progress,
      db,
      uploadsDir: paths.uploadsDir,
      areas,
      pluginRunner: siblings.pluginRunner,
      details,
      pluginsChanged: () => turn.systemPrompt.invalidate("plugins"),
      skills: {
        store: skillStore,
        sources: skillSources,
        pluginRunner: siblings.pluginRunner,
        changed: () => turn.systemPrompt.invalidate("knowledge"),
      },
      mcpConfigProblem,
      notReady,
      allowlist: channels.allowlist,
      people: turn.people,
      tell: channels.tell,
      approvals: turn.approvals,
      prompts: new PromptCommands(siblings.pluginRunner, areas.root),
      questions: new QuestionCommands({
        pluginRunner: siblings.pluginRunner,
        // In the web admin's notifications always, and on the owner's channel when they have one.
        tellOwner: async (text, key) => {
          await channels.notices.addNotice("mcp", "(an MCP server asks you)", text);
          const to = ownerDestination(channels.ownerContact);
          if (to.kind === "channel") await channels.tell(to.channel, to.recipient, text, key);
        },
      }),
      channels,
      login: login.login,
      usage: { db, meter: usage.meter, timezone, model: model.model },
      schedule: { db, timezone, scheduler },
      web: {
        // For the admin UI's home page: the siblings this configuration uses, and the webhook's state.
        services: {
          "plugin-runner": siblings.pluginRunner,
          "python-runner": siblings.pythonRunner,
          ...(config.coder ? { coder: siblings.coder } : {}),
          ...(signalBridge ? { "signal-bridge": signalBridge } : {}),
          ...(whatsappBridge ? { "whatsapp-bridge": whatsappBridge } : {}),
        },
        publicHostname,
        pages: {
          scriptHosts: config.pages?.scriptHosts ?? [],
          connectHosts: config.pages?.connectHosts ?? {},
        },
      },
      password: config.password,
      internalSecret,
      backup: backups && (() => backups.backup()),
      providerSettings: {
        provider: providerInUse,
        configPath: paths.configPath,
        useKey: (key) => model.useKey(key),
        restart: options.restart,
        env,
      },
      fullBackup: {
        dataDir: paths.dataDir,
        configPath: paths.configPath,
        secretFile: paths.secretFile,
        backupDir: paths.backupDir,
        database: db.embedded,
        siblings: [
          {
            name: "plugin-runner",
            client: siblings.pluginRunner,
            parts: ["plugins", "plugin-data", "plugin-runner"],
          },
          ...(config.coder
            ? [{ name: "coder", client: siblings.coder, parts: ["coder", "coder-state"] }]
            : []),
          ...(signalBridge
            ? [{ name: "signal-bridge", client: signalBridge, parts: ["signal-cli", "signal-bridge"] }]
            : []),
          ...(whatsappBridge
            ? [{ name: "whatsapp-bridge", client: whatsappBridge, parts: ["whatsapp-bridge"] }]
            : []),
        ],
      },
      doctor: {
        embedded: db.embedded !== undefined,
        dataDir: paths.dataDir,
        backupDir: paths.backupDir,
        backupIntervalSeconds: settings.BACKUP_INTERVAL_SECONDS,
        mcpConfigProblem,
        provider: async () =>
          withRestartNeeded(
            await providerCheck({
              model: model.model,
              getApiKey: model.getApiKey,
              subscription: model.oauth !== undefined,
              notConfigured: model.notConfigured,
              configPath: paths.configPath,
              ownServer: config.baseUrl !== undefined,
              probe: { remembered: probesAnswered },
            }),
            providerInUse.restartNeeded(),
          ),
        embeddings: () => embeddingsCheck(embeddings),
      },
      logger: logger.child("http"),
    });
    phases.end("services and state");

    // Before listening: the first turn finds the conversation, the provider's library and the
    // connections ready, and a turn rehearsed; the system prompt is composed in the background once
    // the plugin-runner answers. Then answers a crash kept from their audience, then unfinished
    // messages, ahead of anything new.
    const priming = new AbortController();
    cleanup.add(() => priming.abort());
    await warmUpFirstTurn({
      db,
      timezone,
      model: model.model,
      client: model.client,
      conversation: turn.conversation,
      inbox,
      budget: turn.budget,
      systemPrompt: turn.systemPrompt,
      runnerAnswers: () =>
        siblings.pluginRunner.request("GET", "/health", { retries: 0, timeoutMs: 1_000 }).then(
          () => true,
          () => false,
        ),
      signal: priming.signal,
      phases,
      logger,
    });
    const handed = await channels.answers.recover();
    if (handed > 0) logger.info("handed over earlier answers", { count: handed });
    const resumed = await turn.queue.recover();
    if (resumed > 0) logger.info("resuming unfinished messages", { count: resumed });
    await scheduler.start((entry) => void turn.queue.accept(entry));
    phases.end("recovery and scheduler");

    // Receiving a request is bounded (a trickled body cannot hold a socket); answering a turn is not.
    const external = createHttpServer(listeners.external);
    const internal = createHttpServer(listeners.internal);
    const host = settings.HOST;
    const port = await listenOrRefuse(external, {
      service: "app",
      port: settings.PORT,
      host,
      variable: "PORT",
    });
    cleanup.add(() => closeServer(external));
    const internalHost = settings.INTERNAL_HOST ?? host;
    const internalPort = await listenOrRefuse(internal, {
      service: "app (internal)",
      port: settings.INTERNAL_PORT,
      host: internalHost,
      variable: "INTERNAL_PORT",
    });
    cleanup.add(() => closeServer(internal));
    // Open event streams end first, so closing the external server does not wait for them.
    cleanup.add(() => live.close());
    options.instanceLock?.update({ port, host, internalPort, internalHost });
    channels.worker.start();
    embeddings?.worker.start();
    if (backups && settings.BACKUP_INTERVAL_SECONDS > 0) {
      void backups.start().catch((error: unknown) => {
        logger.error("could not schedule backups", { error: errorMessage(error) });
      });
    }
    cleanup.add(channels.start());
    phases.end("listening");
    logger.info("listening", {
      startupMs: phases.total(),
      port,
      internalPort,
      database: db.kind,
      model: `${model.model.provider}/${model.model.id}`,
    });

    return {
      port,
      internalPort,
      config,
      configPath: paths.configPath,
      db,
      queue: turn.queue,
      conversation: turn.conversation,
      live,
      meter: usage.meter,
      close: () => cleanup.run(),
    };
  } catch (error) {
    await cleanup.run();
    throw error;
  }
}
