import type { RequestListener } from "node:http";
import {
  readValidJson,
  toolProgressSchema,
  ownerQuestionSchema,
  HttpError,
  Router,
  checkBearer,
  createRequestListener,
  type Logger,
  type ServiceClient,
} from "@stavrobot/common";
import type { Database } from "./db/database.js";
import { createChatHandler, type ChatDeps } from "./routes/chat.js";
import { answerDatabaseOutage } from "./routes/outage.js";
import { createPageHandler, createPageQueryHandler, type PagesDeps } from "./routes/pages.js";
import { addPluginSettingsRoutes, type PluginSettingsDeps } from "./routes/plugin-settings.js";
import { addMcpOAuthRoutes } from "./routes/mcp-oauth.js";
import { addSkillSettingsRoutes, type SkillSettingsDeps } from "./routes/skill-settings.js";
import { createUploadHandler } from "./routes/upload.js";
import { addAllowlistRoutes } from "./routes/allowlist.js";
import { addPeopleRoutes } from "./routes/people.js";
import { addAnswerRoutes } from "./routes/answers.js";
import { addChatHistoryRoutes } from "./routes/chat-history.js";
import { NotificationStore } from "./db/notifications.js";
import { addEventRoutes } from "./routes/events.js";
import type { LiveEvents } from "./live/events.js";
import { addLoginRoutes } from "./routes/login.js";
import type { LoginFlows } from "./auth/login-flow.js";
import { addUsageRoutes, type UsageRouteDeps } from "./routes/usage.js";
import { addExplorerRoutes } from "./routes/explorer.js";
import { addStatusRoutes } from "./routes/status.js";
import { addWebRoutes } from "./routes/web-pages.js";
import { checkOrigin } from "./web/security.js";
import { PasswordGuard } from "./auth/password-guard.js";
import { createErrorPages } from "./web/error-page.js";
import type { LiveBackup } from "./db/live-backup.js";
import type { ChannelWiring } from "./channels/wiring.js";
import type { Checked } from "./doctor/checks.js";
import { appChecks, type AppCheckDeps } from "./doctor/app-checks.js";
import { collectStatus, type StatusDeps } from "./web/status.js";
import { addFullBackupRoutes, createBackupHandler } from "./routes/backup.js";
import type { FullBackupSources } from "./db/full-backup.js";
import { addProviderSettingsRoutes, type ProviderSettingsDeps } from "./routes/provider-settings.js";
import { addApprovalRoutes } from "./routes/approvals.js";
import type { ApprovalDecider } from "./trust/decisions.js";
import type { QuestionCommands } from "./plugins/questions.js";
import { addEmailFormRoutes } from "./channels/email/form.js";
import { addEmbeddingsSettingsRoutes } from "./routes/embeddings-settings.js";
import { addScheduleRoutes, type ScheduleRouteDeps } from "./routes/schedule.js";

export interface ServerDeps extends ChatDeps, PluginSettingsDeps {
  /** The owner's decisions on calls the trust gate stopped (their commands, and the API). */
  approvals?: ApprovalDecider;
  /** MCP servers' questions: told to the owner (`POST /questions`, internal), answered by their commands. */
  questions?: QuestionCommands;
  db: Database;
  /** The owner's uploads (`POST /api/upload`). */
  uploadsDir: string;
  /** The owner's live events (`GET /api/events`). */
  live: LiveEvents;
  password: string;
  internalSecret: string;
  logger: Logger;
  /** The configured channels: their routes (inbound webhooks, pages) and their home-page parts. */
  channels: Pick<ChannelWiring, "addRoutes" | "status" | "checks" | "ownerIds">;
  /** The subscription login page's flows (`/login`). */
  login: LoginFlows;
  usage: UsageRouteDeps;
  /** The Schedule page's API: the cron entries, their firings and what they cost. */
  schedule: ScheduleRouteDeps;
  /** What the admin UI needs besides the routes' own dependencies. */
  web: WebDeps;
  /** What the doctor (`GET /health?deep=1`, the owner's) needs besides the database and the status. */
  doctor: Omit<AppCheckDeps, "db" | "status" | "channelChecks">;
  /** On the embedded database: takes a backup now (`npm run backup` while the app runs). */
  backup: (() => Promise<LiveBackup>) | undefined;
  /** The Settings page's model provider (config.toml's, and the running model's key). */
  providerSettings: ProviderSettingsDeps;
  /** What the Settings page's full backup is made of. */
  fullBackup: FullBackupSources;
  /** The Skills page's API (`/api/settings/skills...`): absent, the page lists nothing. */
  skills?: SkillSettingsDeps;
}

export interface WebDeps {
  /** The siblings this configuration uses, by name: the home page shows their health. */
  services: Readonly<Record<string, ServiceClient>>;
  /** The public address: a browser's `Origin` naming it is this site, even behind a proxy. */
  publicHostname: string;
  /** `[pages]`: what the model's pages may reach besides their own queries. */
  pages: Pick<PagesDeps, "scriptHosts" | "connectHosts">;
}

const unauthorized = (): HttpError =>
  new HttpError(401, "Unauthorized", undefined, {
    "WWW-Authenticate": 'Basic realm="stavrobot", charset="UTF-8"',
  });

/**
 * Two listeners: the external one (owner's password, HTTP Basic, username ignored) and the
 * internal one (Bearer internal secret) that only accepts `POST /chat` (sibling services),
 * `POST /backup` (`npm run backup` while the app runs on the embedded database), and the
 * plugin-runner's `POST /progress` and `POST /questions`.
 */
export function buildServer(deps: ServerDeps): { external: RequestListener; internal: RequestListener } {
  const chat = createChatHandler(deps);
  // Every check of the owner's password goes through it: wrong ones are logged and slowed down.
  const owner = new PasswordGuard({ password: deps.password, logger: deps.logger.child("auth") });
  const status: StatusDeps = {
    db: deps.db,
    queue: deps.queue,
    services: deps.web.services,
    channels: (siblings) => deps.channels.status(siblings),
    startedAt: new Date(),
  };
  const doctor = (): Promise<Checked> =>
    appChecks({
      ...deps.doctor,
      db: deps.db,
      status: () => collectStatus(status),
      channelChecks: (channels) => deps.channels.checks(channels),
    });
  const pages: PagesDeps = {
    db: deps.db,
    password: deps.password,
    isOwner: (req) => owner.check(req),
    publicHostname: deps.web.publicHostname,
    ...deps.web.pages,
  };
  const external = new Router()
    // Open to anyone as the reference has it; `?deep=1` with the owner's password runs the doctor.
    .get(
      "/health",
      async ({ req, url }) => {
        if (url.searchParams.get("deep") !== "1") return { json: { status: "ok" } };
        if (!owner.check(req)) throw unauthorized();
        const checked = await doctor();
        return { status: checked.status === "fail" ? 503 : 200, json: checked };
      },
      { public: true },
    )
    .post("/chat", chat)
    .post("/api/upload", createUploadHandler(deps))
    // A page, and its queries, check the page's own visibility (a private one needs the password).
    .get("/pages/*", createPageHandler(pages), { public: true })
    .get("/api/pages/*", createPageQueryHandler(pages), { public: true });
  addPluginSettingsRoutes(external, deps);
  addMcpOAuthRoutes(external, deps);
  if (deps.skills) addSkillSettingsRoutes(external, deps.skills);
  addAllowlistRoutes(external, deps.allowlist);
  addProviderSettingsRoutes(external, deps.providerSettings);
  // The Email page's form for [email]: there before email is configured, to configure it.
  addEmailFormRoutes(external, { configPath: deps.providerSettings.configPath });
  addEmbeddingsSettingsRoutes(external, { configPath: deps.providerSettings.configPath });
  addFullBackupRoutes(external, { sources: deps.fullBackup, logger: deps.logger.child("backup") });
  addPeopleRoutes(external, deps.db);
  addAnswerRoutes(external, {
    inbox: deps.inbox,
    notifications: new NotificationStore(deps.db),
    live: deps.live,
  });
  addChatHistoryRoutes(external, { db: deps.db });
  addEventRoutes(external, { live: deps.live, inbox: deps.inbox, logger: deps.logger.child("events") });
  addLoginRoutes(external, deps.login);
  addUsageRoutes(external, deps.usage);
  addScheduleRoutes(external, deps.schedule);
  addWebRoutes(external);
  addExplorerRoutes(external, deps.db);
  addStatusRoutes(external, status);
  // The same checks for the home page, answered 200 whatever they say (a page's 503 is an error).
  external.get("/api/checks", async () => ({ json: await doctor() }));
  // No `notReady` for a channel's messages: they are kept, and their turn says what is missing.
  deps.channels.addRoutes(external, {
    queue: deps.queue,
    allowlist: deps.allowlist,
    people: deps.people,
    tell: deps.tell,
    ...(deps.approvals ? { approvals: deps.approvals } : {}),
    ...(deps.prompts ? { prompts: deps.prompts } : {}),
    ...(deps.questions ? { questions: deps.questions } : {}),
    logger: deps.logger,
  });
  if (deps.approvals) addApprovalRoutes(external, deps.approvals);
  const internal = new Router()
    .post("/chat", chat)
    .post("/backup", createBackupHandler(deps.backup))
    // The plugin-runner passing on a tool's progress for the turn it runs for (best effort).
    .post("/progress", async ({ req }) => {
      const { turn, ...progress } = await readValidJson(req, 16 * 1024, toolProgressSchema);
      deps.progress.report(turn, { type: "progress", ...progress });
      return { status: 204 };
    })
    // The plugin-runner putting an MCP server's question to the owner (plugins/questions.ts).
    .post("/questions", async ({ req }) => {
      const question = await readValidJson(req, 64 * 1024, ownerQuestionSchema);
      if (!deps.questions) throw new HttpError(503, "Questions to the owner are not wired here");
      await deps.questions.tell(question);
      return { status: 204 };
    });
  const securityHeaders = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
  };
  const trustedOrigins = [deps.web.publicHostname];
  return {
    external: createRequestListener(external, {
      logger: deps.logger,
      headers: securityHeaders,
      mapError: answerDatabaseOutage,
      // A browser that opened an address gets a page for an error; API clients keep the JSON.
      errorPage: createErrorPages({ signedIn: (req) => owner.checked(req) }),
      guard: ({ req, publicRoute }) => {
        if (!publicRoute && !owner.check(req)) throw unauthorized();
        // After the password (a caller without it learns nothing), and for public routes too.
        checkOrigin(req, trustedOrigins);
      },
    }),
    internal: createRequestListener(internal, {
      logger: deps.logger.child("internal"),
      headers: securityHeaders,
      mapError: answerDatabaseOutage,
      guard: ({ req }) => {
        if (!checkBearer(req.headers.authorization, deps.internalSecret))
          throw new HttpError(401, "Unauthorized");
      },
    }),
  };
}
