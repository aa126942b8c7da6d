import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** A token pair the fake issued; `access` looks like an Anthropic OAuth token so pi-ai treats it as one. */
export interface Grant {
  access: string;
  refresh: string;
}

export interface FakeOAuth {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** Bodies of every POST to the token endpoint, in order. */
  tokenRequests: Record<string, unknown>[];
  /**
   * What a browser does at the provider: the owner approves, and the provider sends them to the
   * redirect address with a code bound to the PKCE challenge. Returns that address.
   */
  approve(authorizeUrl: string): string;
  /** A token pair as if issued by an earlier login. */
  grant(): Grant;
  /** The next `count` token requests are answered with this status (a 5xx: a passing outage). */
  failNext(status: number, count?: number): void;
  close(): Promise<void>;
}

/**
 * A loopback OAuth 2.0 authorization server speaking the token protocol pi-ai's Anthropic login
 * uses: `POST /v1/oauth/token` with JSON, `authorization_code` (checked against the PKCE
 * challenge: S256 of the verifier) and `refresh_token` (rotating: a used refresh token is dead).
 */
export async function startFakeOAuth(): Promise<FakeOAuth> {
  const tokenRequests: Record<string, unknown>[] = [];
  const codes = new Map<
    string,
    { challenge: string; redirectUri: string; state: string; clientId: string }
  >();
  const liveRefresh = new Set<string>();
  const failures: number[] = [];

  const issue = (): Grant => {
    const grant = {
      access: `sk-ant-oat01-${randomBytes(12).toString("hex")}`,
      refresh: `sk-ant-ort01-${randomBytes(12).toString("hex")}`,
    };
    liveRefresh.add(grant.refresh);
    return grant;
  };

  const answer = (res: ServerResponse, status: number, body: unknown): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };

  const token = (body: Record<string, unknown>): { status: number; body: unknown } => {
    const invalid = { status: 400, body: { error: "invalid_grant", error_description: "Invalid grant" } };
    if (body.grant_type === "authorization_code") {
      const issued = codes.get(String(body.code));
      codes.delete(String(body.code));
      const verifier = String(body.code_verifier ?? "");
      if (
        !issued ||
        issued.clientId !== body.client_id ||
        issued.redirectUri !== body.redirect_uri ||
        issued.state !== body.state ||
        createHash("sha256").update(verifier).digest("base64url") !== issued.challenge
      ) {
        return invalid;
      }
    } else if (body.grant_type === "refresh_token") {
      if (!liveRefresh.delete(String(body.refresh_token))) return invalid;
    } else {
      return { status: 400, body: { error: "unsupported_grant_type" } };
    }
    const grant = issue();
    return {
      status: 200,
      body: {
        access_token: grant.access,
        refresh_token: grant.refresh,
        expires_in: 3600,
        token_type: "Bearer",
      },
    };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (req.method !== "POST" || path !== "/v1/oauth/token") return answer(res, 404, { error: "not_found" });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
    } catch {
      return answer(res, 400, { error: "invalid_request" });
    }
    tokenRequests.push(body);
    const failure = failures.shift();
    if (failure !== undefined) return answer(res, failure, { error: "temporarily_unavailable" });
    const result = token(body);
    answer(res, result.status, result.body);
  };

  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    tokenRequests,
    approve(authorizeUrl) {
      const params = new URL(authorizeUrl).searchParams;
      if (params.get("code_challenge_method") !== "S256") throw new Error("the login did not use PKCE S256");
      const code = randomBytes(16).toString("hex");
      const redirectUri = params.get("redirect_uri") ?? "";
      const state = params.get("state") ?? "";
      codes.set(code, {
        challenge: params.get("code_challenge") ?? "",
        redirectUri,
        state,
        clientId: params.get("client_id") ?? "",
      });
      const back = new URL(redirectUri);
      back.searchParams.set("code", code);
      back.searchParams.set("state", state);
      return back.href;
    },
    grant: issue,
    failNext(status, count = 1) {
      for (let i = 0; i < count; i++) failures.push(status);
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
