import type { IncomingMessage, RequestListener } from "node:http";
import {
  TURN_HEADER,
  turnIdSchema,
  Router,
  addStateArchiveRoute,
  approveRequestSchema,
  badRequest,
  configureRequestSchema,
  mcpOAuthFinishRequestSchema,
  mcpOAuthStartRequestSchema,
  createPluginRequestSchema,
  createServiceListener,
  installRequestSchema,
  PACKAGE_LIMIT_BYTES,
  networkRequestSchema,
  notFound,
  pluginNameRequestSchema,
  questionAnswerSchema,
  QUESTION_ID_PATTERN,
  readBody,
  readValidJson,
  requireContentType,
  runToolRequestSchema,
} from "@stavrobot/common";
import { DomainError } from "@stavrobot/common";
import type { Logger, QuestionAnswer, SandboxStatus, StatePart } from "@stavrobot/common";
import type { InstallJobs } from "./install-jobs.js";
import type { Lifecycle } from "./lifecycle.js";
import type { PermissionStore } from "./permissions.js";
import { isConfigured, readConfigValues } from "./plugin-config.js";
import type { PluginStore } from "./plugins.js";
import type { SourceStore } from "./sources.js";
import type { ApprovalStore } from "./approvals.js";
import type { Formats } from "./formats/index.js";
import type { NetworkPolicy } from "./network.js";
import { OwnerSettings, pluginFacts } from "./owner-settings.js";
import { pluginDetail } from "./present.js";
import { readPluginSkill } from "./skills.js";
import type { ToolService } from "./tool-service.js";

export const BODY_LIMIT_BYTES = 50 * 1024 * 1024;
/** An uploaded Osaurus package travels inline, base64. */
const INSTALL_BODY_LIMIT_BYTES = Math.ceil(PACKAGE_LIMIT_BYTES / 3) * 4 + 128 * 1024;

export interface ServerDeps {
  /** The internal service secret every request must present as `Authorization: Bearer …`. */
  secret: string;
  logger: Logger;
  plugins: PluginStore;
  formats: Formats;
  tools: ToolService;
  lifecycle: Lifecycle;
  /** Installs that answer at once (`Prefer: respond-async`) and report their progress. */
  installJobs: InstallJobs;
  permissions: PermissionStore;
  /** Folder installs: not editable, although they have no `.git`. */
  sources: SourceStore;
  approvals: ApprovalStore;
  network: NetworkPolicy;
  /** The owner's MCP servers (GET /health names those that keep failing). */
  mcp?: McpServerControl;
  /** MCP servers' questions waiting for the owner (`POST /questions/:id` answers one). */
  questions?: OwnerAnswers;
  /** How tool processes are isolated here (reported by `GET /health`). */
  sandbox: SandboxStatus;
  /** The plugins, their data and this service's state, for the app's full backup (`GET /state-archive`). */
  state?: StatePart[];
  bodyLimitBytes?: number;
}

/**
 * What the routes ask of the owner's MCP servers (mcp/servers.ts's McpServers, handed in by
 * host.ts): the routes never import a format.
 */
export interface McpServerControl {
  /** Servers that keep failing, with their last error (secrets removed). */
  failing(): { name: string; state: string; failures: number; lastError?: string; signIn?: "needed" }[];
  /** A Connect from the owner's card: the authorization page to open, or signed in at once. */
  signInStart(
    name: string,
    redirectUrl: string,
  ): Promise<{ authorizationUrl: string } | { connected: true; message: string }>;
  /** The authorization server sent the owner back: the code is exchanged and the server connected. */
  signInFinish(query: {
    state?: string;
    code?: string;
    error?: string;
    error_description?: string;
  }): Promise<{ name: string; message: string }>;
}

/** Where the owner's answers to MCP servers' questions go (mcp/elicitation.ts's OwnerQuestions). */
export interface OwnerAnswers {
  /** Answers a waiting question; returns what to tell the owner. */
  answer(id: string, action: QuestionAnswer["action"], values?: Record<string, string>): string;
}

/** The service's listener: its routes behind the internal secret, and `GET /health` with the sandbox. */
export function buildServer(deps: ServerDeps): RequestListener {
  return createServiceListener(
    { router: buildRoutes(deps), health: () => healthOf(deps) },
    deps.secret,
    deps.logger,
  );
}

/**
 * `GET /health` beyond `status`: the sandbox, whether plugins' network can be taken away, and the
 * MCP servers that keep failing (each with its last error, secrets removed).
 */
export function healthOf(deps: Pick<ServerDeps, "sandbox" | "network" | "mcp">) {
  const failing = deps.mcp?.failing() ?? [];
  return {
    sandbox: deps.sandbox,
    network: { enforced: deps.network.enforced, allowWithoutCut: deps.network.allowWithoutCut },
    ...(failing.length > 0 ? { mcpServersFailing: failing } : {}),
  };
}

/** The route table. Handlers validate, call a domain function and answer; errors become JSON in common's listener. */
export function buildRoutes(deps: ServerDeps): Router {
  const limit = deps.bodyLimitBytes ?? BODY_LIMIT_BYTES;
  const { plugins, tools, lifecycle, logger, permissions, installJobs, sources, approvals, network } = deps;
  const owner = new OwnerSettings({ plugins, formats: deps.formats, approvals, network });
  // The routes keep the wire contract's "bundles" (the app calls them so); inside, a bundle is a plugin.
  const router = new Router()
    .get("/bundles", async () => {
      const listed = (await plugins.list()).map((plugin) => ({
        name: plugin.name,
        description: plugin.description,
        editable: plugin.editable && !sources.get(plugin.name),
        permissions: permissions.get(plugin.name),
        ...pluginFacts(plugin, approvals, network),
      }));
      return { json: { plugins: listed, network: healthOf(deps).network } };
    })
    .get("/bundles/:name", async ({ params }) => {
      const plugin = await plugins.get(params.name ?? "");
      if (!plugin) throw notFound("Bundle not found");
      const values = await readConfigValues(plugin.dir, logger);
      const detail = pluginDetail(plugin, values, permissions.get(plugin.name));
      return {
        json: {
          ...detail,
          ...pluginFacts(plugin, approvals, network),
          editable: detail.editable && !sources.get(plugin.name),
        },
      };
    })
    .get("/bundles/:name/config", async ({ params }) => {
      const plugin = await plugins.get(params.name ?? "");
      if (!plugin) throw notFound("Bundle not found");
      const values = await readConfigValues(plugin.dir, logger);
      const configured = Object.fromEntries(
        Object.keys(plugin.config ?? {}).map((key) => [key, isConfigured(values[key])]),
      );
      return { json: { schema: plugin.config ?? {}, configured, permissions: permissions.get(plugin.name) } };
    })
    .post("/bundles/:name/tools/:tool/run", async ({ req, params }) => {
      const input = await readParameters(req, limit);
      // The app's turn this run is for: its sender may follow the tool's progress, and an async
      // run's result goes back to it (the app routes it to that turn's agent).
      const turn = turnIdSchema.safeParse(Number(req.headers[TURN_HEADER]));
      const answer = await tools.run(
        params.name ?? "",
        params.tool ?? "",
        input,
        turn.success ? turn.data : undefined,
      );
      if (answer.kind === "started") return { status: 202, json: { status: "running" } };
      // A tool that failed is an answer like any other: the request itself was fine.
      return { json: answer.outcome };
    })
    // The owner's answer to an MCP server's question, as the app passes it on (elicitation.ts).
    .post("/questions/:id", async ({ req, params }) => {
      const id = params.id ?? "";
      const body = await readValidJson(req, 64 * 1024, questionAnswerSchema);
      if (!deps.questions || !QUESTION_ID_PATTERN.test(id))
        throw notFound(`No question ${id.slice(0, 20)} waits for an answer.`);
      return { json: { message: deps.questions.answer(id, body.action, body.values) } };
    })
    .post("/create", async ({ req }) => {
      const body = await readValidJson(req, limit, createPluginRequestSchema);
      return { status: 201, json: await lifecycle.create(body.name, body.description) };
    })
    .post("/install", async ({ req }) => {
      const body = await readValidJson(req, Math.max(limit, INSTALL_BODY_LIMIT_BYTES), installRequestSchema);
      if ("package" in body) {
        const { filename, data, signature } = body.package;
        return {
          json: await lifecycle.installPackage({
            fileName: filename,
            bytes: Buffer.from(data, "base64"),
            ...(signature !== undefined ? { signature } : {}),
          }),
        };
      }
      // Callers that want to show progress ask for a job; everyone else waits for the answer.
      if (prefersAsync(req)) {
        const jobId = installJobs.start(body.url);
        return { status: 202, json: { jobId }, headers: { Location: `/jobs/${jobId}` } };
      }
      return { json: await lifecycle.install(body.url) };
    })
    .get("/bundles/:name/skills/:skill", async ({ params }) => {
      const plugin = await plugins.get(params.name ?? "");
      if (!plugin) throw notFound("Bundle not found");
      return { json: await readPluginSkill(plugin, params.skill ?? "") };
    })
    .get("/jobs/:id", ({ params }) => {
      const job = installJobs.get(params.id ?? "");
      if (!job) throw notFound("Job not found");
      return { json: job };
    })
    .post("/update", async ({ req }) => {
      const body = await readValidJson(req, limit, pluginNameRequestSchema);
      return { json: await lifecycle.update(body.name) };
    })
    .post("/remove", async ({ req }) => {
      const body = await readValidJson(req, limit, pluginNameRequestSchema);
      return { json: await lifecycle.remove(body.name) };
    })
    .post("/approve", async ({ req }) => {
      const body = await readValidJson(req, limit, approveRequestSchema);
      return { json: await owner.approve(body.name, body.tool) };
    })
    .post("/network", async ({ req }) => {
      const body = await readValidJson(req, limit, networkRequestSchema);
      return { json: await owner.setNetwork(body.name, body.network) };
    })
    .post("/configure", async ({ req }) => {
      const body = await readValidJson(req, limit, configureRequestSchema);
      return { json: await lifecycle.configure(body.name, body.config) };
    })
    // Owner only (the app's Connect button and its OAuth callback): a remote MCP server's sign-in.
    .post("/mcp/oauth/start", async ({ req }) => {
      const body = await readValidJson(req, limit, mcpOAuthStartRequestSchema);
      if (!deps.mcp) throw new DomainError("not-found", `No MCP server "${body.name}" is declared.`);
      return { json: await deps.mcp.signInStart(body.name, body.redirectUrl) };
    })
    .post("/mcp/oauth/finish", async ({ req }) => {
      const body = await readValidJson(req, limit, mcpOAuthFinishRequestSchema);
      if (!deps.mcp) throw new DomainError("invalid", "No MCP server is declared.");
      return { json: await deps.mcp.signInFinish(body) };
    });
  return deps.state ? addStateArchiveRoute(router, deps.state, logger) : router;
}

/** `Prefer: respond-async` (RFC 7240), among any other preferences the request states. */
function prefersAsync(req: IncomingMessage): boolean {
  return String(req.headers.prefer ?? "")
    .split(",")
    .some((preference) => preference.split(";")[0]?.trim().toLowerCase() === "respond-async");
}

/** A tool's parameters: a JSON object, or nothing at all for a tool without parameters. */
async function readParameters(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  requireContentType(req, ["application/json"]);
  const raw = await readBody(req, limit);
  if (raw.length === 0) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString("utf8"));
  } catch (error) {
    throw badRequest(`Invalid JSON: ${(error as Error).message}`);
  }
  const result = runToolRequestSchema.safeParse(parsed);
  if (!result.success) throw badRequest("Request body must be a JSON object of parameters");
  return result.data;
}
