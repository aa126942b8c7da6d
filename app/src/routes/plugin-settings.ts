import type { IncomingMessage } from "node:http";
import type { Router } from "@stavrobot/common";
import {
  ServiceError,
  approveRequestSchema,
  configureRequestSchema,
  installJobSchema,
  installRequestSchema,
  networkRequestSchema,
  pluginNameRequestSchema,
  pluginNameSchema,
  readValidJson,
  type Reply,
  type ServiceClient,
} from "@stavrobot/common";
import type { z } from "zod";
import type { PluginDetailCache } from "../plugins/detail-cache.js";

const BODY_LIMIT = 64 * 1024;
const LONG_CALL_MS = 5 * 60_000;
/** Job ids are the runner's UUIDs; anything else is not looked up. */
const JOB_ID = /^[A-Za-z0-9-]{1,64}$/;

export interface PluginSettingsDeps {
  pluginRunner: ServiceClient;
  details: PluginDetailCache;
  /** Told after every change the owner makes, so the model's plugin list is read again. */
  pluginsChanged: () => void;
  /** Why config.toml's last change could not be used for the MCP servers (the list shows it). */
  mcpConfigProblem?: () => string | undefined;
}

/**
 * The owner's plugin settings (behind the owner's password; the web admin UI uses them):
 * everything the model's tools can do, plus what only the owner may decide: `permissions`, the
 * approval of a plugin that waits for it (`approve {name, tool?}`) and its network (`network
 * {name, network}`). Config
 * values are write-only here too: the config route says which keys are set, never their values.
 * The runner's status and error body are passed through. An install sent with
 * `Prefer: respond-async` answers 202 `{jobId}` at once; `GET /api/settings/plugins/jobs/<id>`
 * then reports its progress (`cloning`, `init`, `done` with the install's answer, or `failed`).
 */
export function addPluginSettingsRoutes(router: Router, deps: PluginSettingsDeps): Router {
  const { pluginRunner } = deps;
  const forward = async (
    method: string,
    path: string,
    body?: unknown,
    timeoutMs?: number,
    headers?: Record<string, string>,
  ): Promise<Reply> => {
    try {
      const answer = await pluginRunner.request(method, path, {
        body,
        ...(timeoutMs ? { timeoutMs } : {}),
        ...(headers ? { headers } : {}),
      });
      return { status: answer.status, json: answer.data };
    } catch (error) {
      if (error instanceof ServiceError && error.status !== undefined)
        return { status: error.status, json: error.body };
      if (error instanceof ServiceError)
        return { status: 502, json: { error: "The plugin runner is unreachable." } };
      throw error;
    }
  };
  const name = (value: string | undefined): string => {
    const parsed = pluginNameSchema.safeParse(value);
    return parsed.success ? parsed.data : "-invalid-";
  };
  const post = <T extends z.ZodType>(path: string, schema: T, target: string, timeoutMs?: number) =>
    router.post(path, async ({ req }) => {
      const body = await readValidJson(req, BODY_LIMIT, schema);
      const prefer = asyncPreference(req);
      const reply = await forward("POST", target, body, timeoutMs, prefer ? { Prefer: prefer } : undefined);
      deps.details.forget((body as { name?: string }).name);
      deps.pluginsChanged();
      return reply;
    });
  router
    .get("/api/settings/plugins/list", async () => {
      const reply = await forward("GET", "/bundles");
      const problem = deps.mcpConfigProblem?.();
      if (!problem || reply.status !== 200 || typeof reply.json !== "object" || reply.json === null)
        return reply;
      return { ...reply, json: { ...reply.json, mcpConfigProblem: problem } };
    })
    .get("/api/settings/plugins/:name/detail", ({ params }) =>
      forward("GET", `/bundles/${name(params.name)}`),
    )
    .get("/api/settings/plugins/:name/config", ({ params }) =>
      forward("GET", `/bundles/${name(params.name)}/config`),
    );
  post("/api/settings/plugins/install", installRequestSchema, "/install", LONG_CALL_MS);
  post("/api/settings/plugins/update", pluginNameRequestSchema, "/update", LONG_CALL_MS);
  post("/api/settings/plugins/remove", pluginNameRequestSchema, "/remove");
  post("/api/settings/plugins/configure", configureRequestSchema, "/configure");
  // Owner only, like permissions: the model's tools have no way to send these.
  post("/api/settings/plugins/approve", approveRequestSchema, "/approve");
  post("/api/settings/plugins/network", networkRequestSchema, "/network");
  // After the `:name/...` routes, so a plugin named "jobs" keeps its own; a job id is never "detail".
  router.get("/api/settings/plugins/jobs/:id", async ({ params }) => {
    const id = params.id ?? "";
    if (!JOB_ID.test(id)) return { status: 404, json: { error: "Job not found" } };
    const reply = await forward("GET", `/jobs/${id}`);
    // A plugin installed by the job may replace one whose details were cached.
    const job = installJobSchema.safeParse(reply.json);
    if (job.success && job.data.result) {
      deps.details.forget(job.data.result.name);
      deps.pluginsChanged();
    }
    return reply;
  });
  return router;
}

/** The request's `Prefer` header when it asks to be answered at once (only the install honours it). */
function asyncPreference(req: IncomingMessage): string | undefined {
  const prefer = req.headers.prefer;
  return typeof prefer === "string" && /\brespond-async\b/i.test(prefer) ? "respond-async" : undefined;
}
