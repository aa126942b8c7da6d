import type { IncomingMessage } from "node:http";
import {
  HttpError,
  ServiceError,
  mcpOAuthFinishRequestSchema,
  mcpOAuthFinishResponseSchema,
  mcpOAuthStartResponseSchema,
  pluginNameRequestSchema,
  readValidJson,
  type Router,
  type ServiceClient,
} from "@stavrobot/common";

/** The app's route the authorization server sends the owner's browser back to. */
export const MCP_OAUTH_CALLBACK = "/oauth/mcp/callback";

export interface McpOAuthDeps {
  pluginRunner: ServiceClient;
  /** Told once a server is signed in (its tools come back to the model's list). */
  pluginsChanged: () => void;
}

/**
 * An MCP server's OAuth sign-in, behind the owner's password: `POST /api/settings/plugins/mcp-connect
 * {name}` answers the authorization page the browser opens (the callback is this app at the origin
 * the owner's browser used), and the callback hands the authorization server's answer to the
 * runner, then goes back to the Plugins page. Tokens stay in the runner; nothing here sees them.
 */
export function addMcpOAuthRoutes(router: Router, deps: McpOAuthDeps): Router {
  const ask = async (path: string, body: unknown): Promise<unknown> => {
    try {
      return (await deps.pluginRunner.request("POST", path, { body })).data;
    } catch (error) {
      if (error instanceof ServiceError && error.status !== undefined) {
        const message = (error.body as { error?: unknown } | undefined)?.error;
        throw new HttpError(error.status, typeof message === "string" ? message : "The sign-in failed.");
      }
      if (error instanceof ServiceError) throw new HttpError(502, "The plugin runner is unreachable.");
      throw error;
    }
  };
  return router
    .post("/api/settings/plugins/mcp-connect", async ({ req }) => {
      const { name } = await readValidJson(req, 4096, pluginNameRequestSchema);
      const redirectUrl = `${browserOrigin(req)}${MCP_OAUTH_CALLBACK}`;
      const started = mcpOAuthStartResponseSchema.parse(await ask("/mcp/oauth/start", { name, redirectUrl }));
      if ("connected" in started) deps.pluginsChanged();
      return { json: started };
    })
    .get(MCP_OAUTH_CALLBACK, async ({ url }) => {
      const query = mcpOAuthFinishRequestSchema.safeParse(Object.fromEntries(url.searchParams));
      if (!query.success) throw new HttpError(400, "The sign-in came back with a query too long to be real.");
      const done = mcpOAuthFinishResponseSchema.parse(await ask("/mcp/oauth/finish", query.data));
      deps.pluginsChanged();
      return {
        status: 303,
        headers: { Location: `/settings/plugins?signedIn=${encodeURIComponent(done.name)}` },
      };
    });
}

/** Where the owner's browser reached the app: its Origin (checked against the host), else the Host. */
function browserOrigin(req: IncomingMessage): string {
  const origin = req.headers.origin;
  if (typeof origin === "string" && /^https?:\/\/[^/]+$/.test(origin)) return origin;
  return `http://${req.headers.host ?? "localhost"}`;
}
