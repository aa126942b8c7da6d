import type { IncomingMessage, RequestListener } from "node:http";
import {
  HttpError,
  Router,
  badRequest,
  checkBearer,
  configureRequestSchema,
  createPluginRequestSchema,
  createRequestListener,
  installRequestSchema,
  notFound,
  pluginNameRequestSchema,
  readBody,
  readValidJson,
  runToolRequestSchema,
} from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import type { BundleStore } from "./bundles.js";
import type { Lifecycle } from "./lifecycle.js";
import { readConfigValues } from "./plugin-config.js";
import { bundleDetail } from "./present.js";
import type { ToolService } from "./tool-service.js";

export const BODY_LIMIT_BYTES = 50 * 1024 * 1024;

export interface ServerDeps {
  /** The internal service secret every request must present as `Authorization: Bearer …`. */
  secret: string;
  logger: Logger;
  bundles: BundleStore;
  tools: ToolService;
  lifecycle: Lifecycle;
  bodyLimitBytes?: number;
}

/** The route table. Handlers validate, call a domain function and answer; errors become JSON in common's listener. */
export function buildServer(deps: ServerDeps): RequestListener {
  const limit = deps.bodyLimitBytes ?? BODY_LIMIT_BYTES;
  const { bundles, tools, lifecycle, logger } = deps;
  const router = new Router()
    .get("/health", () => ({ json: { status: "ok" } }))
    .get("/bundles", async () => {
      const plugins = (await bundles.list()).map((b) => ({
        name: b.name,
        description: b.description,
        editable: b.editable,
      }));
      return { json: { plugins } };
    })
    .get("/bundles/:name", async ({ params }) => {
      const bundle = await bundles.get(params.name ?? "");
      if (!bundle) throw notFound("Bundle not found");
      return { json: bundleDetail(bundle, await readConfigValues(bundle.dir, logger)) };
    })
    .get("/bundles/:name/config", async ({ params }) => {
      const bundle = await bundles.get(params.name ?? "");
      if (!bundle) throw notFound("Bundle not found");
      return { json: { schema: bundle.config ?? {}, values: await readConfigValues(bundle.dir, logger) } };
    })
    .post("/bundles/:name/tools/:tool/run", async ({ req, params }) => {
      const input = await readParameters(req, limit);
      const answer = await tools.run(params.name ?? "", params.tool ?? "", input);
      if (answer.kind === "started") return { status: 202, json: { status: "running" } };
      return { status: answer.outcome.success ? 200 : 500, json: answer.outcome };
    })
    .post("/create", async ({ req }) => {
      const body = await readValidJson(req, limit, createPluginRequestSchema);
      return { status: 201, json: await lifecycle.create(body.name, body.description) };
    })
    .post("/install", async ({ req }) => {
      const body = await readValidJson(req, limit, installRequestSchema);
      return { json: await lifecycle.install(body.url) };
    })
    .post("/update", async ({ req }) => {
      const body = await readValidJson(req, limit, pluginNameRequestSchema);
      return { json: await lifecycle.update(body.name) };
    })
    .post("/remove", async ({ req }) => {
      const body = await readValidJson(req, limit, pluginNameRequestSchema);
      return { json: await lifecycle.remove(body.name) };
    })
    .post("/configure", async ({ req }) => {
      const body = await readValidJson(req, limit, configureRequestSchema);
      return { json: await lifecycle.configure(body.name, body.config) };
    });

  return createRequestListener(router, {
    logger,
    guard: ({ req, url }) => {
      if (url.pathname === "/health") return;
      if (!checkBearer(req.headers.authorization, deps.secret)) throw new HttpError(401, "Unauthorized");
    },
  });
}

/** A tool's parameters: a JSON object, or nothing at all for a tool without parameters. */
async function readParameters(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
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
