import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

/**
 * A loopback OAuth 2.1 authorization server and the MCP server it protects, on one port, as the
 * MCP authorization spec has them: the MCP endpoint answers 401 with `WWW-Authenticate: Bearer
 * resource_metadata=…`, RFC 9728 protected-resource metadata, RFC 8414 authorization-server
 * metadata, RFC 7591 registration, an authorize endpoint that approves at once (the owner's
 * consent) or, with `consentPage`, shows a page whose Approve button does (and Deny refuses),
 * with PKCE S256 enforced, and a token endpoint for codes and refresh tokens.
 */
export interface OAuthFixture {
  url: string;
  /** Every token issued (access and refresh), to look for in results and logs. */
  issued: string[];
  registrations: number;
  refreshes: number;
  /** Tool calls and the access token each came with. */
  calls: string[];
  /** How long an access token lives (s): under the client's one-minute margin, each use refreshes. */
  expiresIn: number;
  /** Refresh grants answered `invalid_grant` (the sign-in lapsed at the authorization server). */
  refuseRefresh: boolean;
  /** Every access token refused from now on. */
  revokeAll(): void;
  /** The protected-resource metadata document, replaced (a malformed one). */
  resourceMetadata: unknown;
  /** The authorize endpoint sends back this OAuth error instead of a code. */
  authorizeError: string | undefined;
  /** The authorize endpoint shows a consent page (a person's browser presses Approve) instead of approving at once. */
  consentPage: boolean;
  close(): Promise<void>;
}

export async function startOAuthFixture(): Promise<OAuthFixture> {
  const clients = new Map<string, { redirectUris: string[] }>();
  const codes = new Map<string, { clientId: string; challenge: string; redirectUri: string }>();
  const access = new Set<string>();
  const refresh = new Set<string>();
  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => {
      res.writeHead(500).end(String(error));
    });
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
  );
  const base = `http://127.0.0.1:${port}`;
  const fixture: OAuthFixture = {
    url: `${base}/mcp`,
    issued: [],
    registrations: 0,
    refreshes: 0,
    calls: [],
    expiresIn: 3600,
    refuseRefresh: false,
    revokeAll: () => access.clear(),
    resourceMetadata: { resource: `${base}/mcp`, authorization_servers: [base] },
    authorizeError: undefined,
    consentPage: false,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const issue = () => {
    const pair = { access: token("at"), refresh: token("rt") };
    access.add(pair.access);
    refresh.add(pair.refresh);
    fixture.issued.push(pair.access, pair.refresh);
    return {
      access_token: pair.access,
      refresh_token: pair.refresh,
      token_type: "Bearer",
      expires_in: fixture.expiresIn,
    };
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", base);
    const json = (status: number, body: unknown): void =>
      void res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    switch (url.pathname) {
      case "/.well-known/oauth-protected-resource/mcp":
        return json(200, fixture.resourceMetadata);
      case "/.well-known/oauth-authorization-server":
        return json(200, {
          issuer: base,
          authorization_endpoint: `${base}/authorize`,
          token_endpoint: `${base}/token`,
          registration_endpoint: `${base}/register`,
          response_types_supported: ["code"],
          grant_types_supported: ["authorization_code", "refresh_token"],
          code_challenge_methods_supported: ["S256"],
          token_endpoint_auth_methods_supported: ["none"],
        });
      case "/register": {
        const body = JSON.parse(await text(req)) as { redirect_uris: string[] };
        const clientId = token("client");
        clients.set(clientId, { redirectUris: body.redirect_uris });
        fixture.registrations++;
        return json(201, {
          ...body,
          client_id: clientId,
          client_id_issued_at: Math.floor(Date.now() / 1000),
        });
      }
      case "/authorize": {
        const query = url.searchParams;
        const client = clients.get(query.get("client_id") ?? "");
        const redirectUri = query.get("redirect_uri") ?? "";
        if (!client || !client.redirectUris.includes(redirectUri))
          return json(400, { error: "invalid_client" });
        if (query.get("code_challenge_method") !== "S256" || !query.get("code_challenge"))
          return json(400, { error: "invalid_request", error_description: "PKCE S256 is required" });
        // The consent page posts the same query back with the owner's answer: Approve or Deny.
        if (fixture.consentPage && req.method === "GET") {
          const action = `/authorize?${escapeHtml(query.toString())}`;
          res
            .writeHead(200, { "content-type": "text/html; charset=utf-8" })
            .end(
              `<!doctype html><link rel="icon" href="data:,"><title>Sign in to the fixture</title><h1>Let Stavrobot use your account?</h1>` +
                `<form method="post" action="${action}"><button name="answer" value="approve">Approve</button>` +
                `<button name="answer" value="deny">Deny</button></form>`,
            );
          return;
        }
        const back = new URL(redirectUri);
        back.searchParams.set("state", query.get("state") ?? "");
        const denied = req.method === "POST" && new URLSearchParams(await text(req)).get("answer") === "deny";
        if (denied) back.searchParams.set("error", "access_denied");
        else if (fixture.authorizeError) back.searchParams.set("error", fixture.authorizeError);
        else {
          const code = token("code");
          codes.set(code, {
            clientId: query.get("client_id") ?? "",
            challenge: query.get("code_challenge") ?? "",
            redirectUri,
          });
          back.searchParams.set("code", code);
        }
        res.writeHead(302, { location: back.href }).end();
        return;
      }
      case "/token": {
        const form = new URLSearchParams(await text(req));
        if (form.get("grant_type") === "authorization_code") {
          const code = codes.get(form.get("code") ?? "");
          codes.delete(form.get("code") ?? "");
          const verifier = form.get("code_verifier") ?? "";
          const challenge = createHash("sha256").update(verifier).digest("base64url");
          if (!code || code.challenge !== challenge || code.redirectUri !== form.get("redirect_uri"))
            return json(400, { error: "invalid_grant" });
          return json(200, issue());
        }
        if (form.get("grant_type") === "refresh_token") {
          const old = form.get("refresh_token") ?? "";
          if (fixture.refuseRefresh || !refresh.delete(old)) return json(400, { error: "invalid_grant" });
          fixture.refreshes++;
          return json(200, issue());
        }
        return json(400, { error: "unsupported_grant_type" });
      }
      case "/mcp":
        return mcp(req, res, url);
      default:
        res.writeHead(404).end();
    }
  }

  async function mcp(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (!bearer || !access.has(bearer)) {
      res
        .writeHead(401, {
          "www-authenticate": `Bearer error="invalid_token", resource_metadata="${url.origin}/.well-known/oauth-protected-resource/mcp"`,
          "content-type": "application/json",
        })
        .end('{"error":"invalid_token"}');
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const body: unknown = JSON.parse(await text(req));
    const mcpServer = new McpServer({ name: "oauth-fixture", version: "1.0.0" });
    mcpServer.registerTool("whoami", { description: "Says who is calling." }, () => {
      fixture.calls.push(bearer);
      return { content: [{ type: "text", text: "you are signed in" }] };
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => void transport.close().then(() => mcpServer.close()));
    await mcpServer.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  return fixture;
}

function token(kind: string): string {
  return `${kind}-${randomBytes(16).toString("hex")}`;
}

function escapeHtml(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
}

async function text(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
