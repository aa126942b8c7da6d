import { randomBytes, timingSafeEqual } from "node:crypto";
import {
  auth,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
  refreshAuthorization,
  UnauthorizedError,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { OAuthError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";
import { DomainError, errorMessage } from "@stavrobot/common";
import type { McpServerDeclaration } from "@stavrobot/common";
import type { OAuthStore } from "./oauth-store.js";

/** A token this close to its expiry is refreshed before it is sent. */
const REFRESH_BEFORE_MS = 60_000;
/** How long a Connect waits for the owner to come back from the authorization server. */
const PENDING_MS = 15 * 60_000;
/** Where a redirect URL is needed before any Connect gave one (never reached: no Connect, no redirect). */
const NO_REDIRECT = "http://127.0.0.1/no-connect-yet";

/** Thrown when a server can only be reached after the owner signs in again (from its card). */
export class SignInNeeded extends Error {
  constructor(server: string, why: string) {
    super(`MCP server "${server}" needs the owner to sign in (Connect on its card in Plugins): ${why}`);
  }
}

/**
 * Whether a remote server is spoken to with OAuth: one declared with no headers, or with an
 * `oauth` table. Headers of the owner's (an `Authorization`, or an API key such as `X-API-Key` as
 * other hosts' READMEs show it) are how such a server is signed in to, so its 401 means those
 * headers were refused, not a sign-in to offer. A server that takes a header of another kind and
 * OAuth both is declared with `[mcpServers.<name>.oauth]`; an `Authorization` header always wins.
 */
export function usesOAuth(declaration: McpServerDeclaration): boolean {
  if (!declaration.url) return false;
  const headers = Object.keys(declaration.headers).map((key) => key.toLowerCase());
  if (headers.includes("authorization")) return false;
  return headers.length === 0 || declaration.oauth !== undefined;
}

export interface ServerOAuthOptions {
  name: string;
  declaration: McpServerDeclaration;
  store: OAuthStore;
  /** Told when the sign-in lapses or is made again (the card's "needs sign-in"). */
  changed?: () => void;
  now?: () => number;
}

/**
 * The SDK's `OAuthClientProvider` for one remote MCP server, kept in the runner's OAuth store. The
 * transport asks it for tokens before each request (a token near its expiry is refreshed first)
 * and runs the SDK's `auth()` on a 401: discovery (RFC 9728 from the 401's `resource_metadata`, or
 * `.well-known`), RFC 8414 metadata, refresh. In the background (`interactive` false) it never
 * registers a client nor starts an authorization: it records that the owner must sign in. A Connect
 * (`startSignIn`) is interactive: dynamic registration where offered, PKCE, `state`.
 */
export class ServerOAuth implements OAuthClientProvider {
  private refreshing: Promise<void> | undefined;
  private authorizationUrl: URL | undefined;
  private readonly now: () => number;
  /** Set when a connection stopped for want of a sign-in; cleared by new tokens. */
  needsSignIn = false;

  constructor(
    private readonly options: ServerOAuthOptions,
    private readonly interactive = false,
    private readonly connectRedirect?: string,
  ) {
    this.now = options.now ?? Date.now;
  }

  private get record() {
    return this.options.store.get(this.options.name);
  }

  private update(change: Parameters<OAuthStore["update"]>[1]) {
    return this.options.store.update(this.options.name, change);
  }

  get lapsed(): string | undefined {
    return this.record.lapsed;
  }

  get redirectUrl(): string {
    return this.connectRedirect ?? this.record.redirectUrl ?? NO_REDIRECT;
  }

  get clientMetadata(): OAuthClientMetadata {
    const { oauth } = this.options.declaration;
    return {
      client_name: "Stavrobot",
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: oauth?.clientSecret ? "client_secret_post" : "none",
      ...(oauth?.scope ? { scope: oauth.scope } : {}),
    };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    const { oauth } = this.options.declaration;
    const stored = this.record.client;
    if (oauth?.clientId) {
      const issuer = stored?.client_id === oauth.clientId ? stored.issuer : undefined;
      return {
        client_id: oauth.clientId,
        ...(oauth.clientSecret ? { client_secret: oauth.clientSecret } : {}),
        ...(issuer ? { issuer } : {}),
      };
    }
    // A client registered for another callback would be refused it: a Connect registers again.
    if (this.interactive && this.record.redirectUrl !== this.connectRedirect) return undefined;
    if (!stored && !this.interactive) {
      this.needsSignIn = true;
      throw new SignInNeeded(this.options.name, "it was never signed in");
    }
    return stored;
  }

  async saveClientInformation(client: OAuthClientInformationMixed): Promise<void> {
    await this.update((record) => ({ ...record, client, redirectUrl: this.redirectUrl }));
  }

  async tokens(): Promise<OAuthTokens | undefined> {
    const tokens = this.record.tokens;
    if (
      tokens?.refresh_token &&
      tokens.expires_at !== undefined &&
      this.now() > tokens.expires_at - REFRESH_BEFORE_MS
    ) {
      this.refreshing ??= this.refresh(tokens.refresh_token).finally(() => (this.refreshing = undefined));
      await this.refreshing;
    }
    return this.record.tokens;
  }

  async saveTokens(tokens: OAuthTokens): Promise<void> {
    const expires_at = tokens.expires_in !== undefined ? this.now() + tokens.expires_in * 1000 : undefined;
    await this.update((record) => {
      const { lapsed: _lapsed, ...rest } = record;
      return { ...rest, tokens: { ...tokens, ...(expires_at !== undefined ? { expires_at } : {}) } };
    });
    this.needsSignIn = false;
    this.options.changed?.();
  }

  async redirectToAuthorization(url: URL): Promise<void> {
    if (this.interactive) {
      this.authorizationUrl = url;
      return;
    }
    await this.lapse("its authorization server asks for a new sign-in");
    throw new SignInNeeded(this.options.name, "its authorization server asks for a new sign-in");
  }

  private pendingState: string | undefined;

  state(): string {
    this.pendingState ??= randomBytes(32).toString("base64url");
    return this.pendingState;
  }

  async saveCodeVerifier(verifier: string): Promise<void> {
    if (!this.interactive) return;
    const state = this.state();
    await this.update((record) => ({ ...record, pending: { state, verifier, at: this.now() } }));
  }

  codeVerifier(): string {
    const verifier = this.record.pending?.verifier;
    if (!verifier) throw new Error("no sign-in is under way for this server");
    return verifier;
  }

  async saveDiscoveryState(discovery: OAuthDiscoveryState): Promise<void> {
    await this.update((record) => ({ ...record, discovery }));
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.record.discovery;
  }

  async invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery"): Promise<void> {
    await this.update((record) => {
      const next = { ...record };
      if (scope === "all" || scope === "client") delete next.client;
      if (scope === "all" || scope === "tokens") delete next.tokens;
      if (scope === "all" || scope === "verifier") delete next.pending;
      if (scope === "all" || scope === "discovery") delete next.discovery;
      return next;
    });
  }

  /** The sign-in no longer holds: its tokens are dropped and its card says so. */
  async lapse(why: string): Promise<void> {
    this.needsSignIn = true;
    await this.update((record) => {
      const { tokens: _tokens, ...rest } = record;
      return { ...rest, lapsed: why };
    });
    this.options.changed?.();
  }

  /** The authorization page the last interactive `auth()` chose (PKCE challenge and state in it). */
  takeAuthorizationUrl(): URL | undefined {
    return this.authorizationUrl;
  }

  /**
   * A refresh before the token expires, at the authorization server discovery found. A refusal
   * (an OAuth error) lapses the sign-in; an unreachable server keeps the old token (a 401 then
   * runs the SDK's own refresh).
   */
  private async refresh(refreshToken: string): Promise<void> {
    const { discovery } = this.record;
    const client = this.clientInformation();
    if (!discovery || !client) return;
    try {
      const tokens = await refreshAuthorization(discovery.authorizationServerUrl, {
        metadata: discovery.authorizationServerMetadata,
        clientInformation: client,
        refreshToken,
        ...(discovery.resourceMetadata?.resource ? { resource: discovery.resourceMetadata.resource } : {}),
      });
      // A server that does not rotate refresh tokens keeps the one it gave.
      await this.saveTokens({ refresh_token: refreshToken, ...tokens });
    } catch (error) {
      if (error instanceof OAuthError)
        await this.lapse(`its token could not be refreshed (${error.errorCode})`);
    }
  }
}

/** Whether a connection failed for want of a sign-in (a 401 the SDK could not mend). */
export function isSignInFailure(error: unknown): boolean {
  if (error instanceof SignInNeeded || error instanceof UnauthorizedError) return true;
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === 401;
}

/**
 * A Connect: the page of the server's authorization server the owner's browser opens, or, when a
 * refresh token still works, signed in at once. The server is asked once without a token so the
 * 401's `WWW-Authenticate` names its protected-resource metadata and scope (else `.well-known`);
 * discovery is made again rather than taken from the last.
 */
export async function startSignIn(
  options: ServerOAuthOptions,
  redirectUrl: string,
): Promise<{ authorizationUrl: string } | { connected: true }> {
  const url = options.declaration.url as string;
  const provider = new ServerOAuth(options, true, redirectUrl);
  const challenge = await probe(url);
  // The SDK falls back to the server's origin when this document is unusable; one the server
  // named itself must be right, or the owner would sign in somewhere the server did not mean.
  if (challenge.resourceMetadataUrl)
    await discoverOAuthProtectedResourceMetadata(url, {
      resourceMetadataUrl: challenge.resourceMetadataUrl,
    }).catch((error: unknown) => {
      throw new DomainError(
        "upstream",
        `MCP server "${options.name}": sign-in could not start: its protected-resource metadata (${challenge.resourceMetadataUrl?.href}) is not usable: ${oauthErrorText(error)}`,
      );
    });
  // A Connect finds the server's authorization server afresh (it may have moved).
  await provider.invalidateCredentials("discovery");
  try {
    const result = await auth(provider, {
      serverUrl: url,
      ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
      ...(challenge.scope ? { scope: challenge.scope } : {}),
    });
    const page = provider.takeAuthorizationUrl();
    if (result === "REDIRECT" && page) return { authorizationUrl: page.href };
    return { connected: true };
  } catch (error) {
    throw new DomainError(
      "upstream",
      `MCP server "${options.name}": sign-in could not start: ${oauthErrorText(error)}`,
    );
  }
}

/**
 * The end of a Connect: the callback's query, matched to the Connect by its `state`; the code is
 * exchanged (with the PKCE verifier) for tokens. Returns the server signed in.
 */
export async function finishSignIn(
  store: OAuthStore,
  lookup: (name: string) => ServerOAuthOptions | undefined,
  query: { state?: string; code?: string; error?: string; error_description?: string },
  now: () => number = Date.now,
): Promise<string> {
  if (!query.state)
    throw new DomainError("invalid", "The sign-in came back without its state; press Connect again.");
  const match = store.entries().find(([, record]) => sameText(record.pending?.state, query.state as string));
  if (!match)
    throw new DomainError(
      "invalid",
      "The sign-in came back with a state no Connect is waiting for (an old or forged link); press Connect again.",
    );
  const [name, record] = match;
  const options = lookup(name);
  const clear = () =>
    store.update(name, (current) => {
      const { pending: _pending, ...rest } = current;
      return rest;
    });
  if (!options?.declaration.url) {
    await clear();
    throw new DomainError("invalid", `MCP server "${name}" is no longer declared.`);
  }
  if (query.error) {
    await clear();
    const detail = query.error_description ? ` (${query.error_description.slice(0, 300)})` : "";
    throw new DomainError(
      "invalid",
      `The authorization server of MCP server "${name}" refused the sign-in: ${query.error.slice(0, 100)}${detail}.`,
    );
  }
  if ((record.pending?.at ?? 0) + PENDING_MS < now()) {
    await clear();
    throw new DomainError(
      "invalid",
      `The sign-in to MCP server "${name}" took too long; press Connect again.`,
    );
  }
  if (!query.code) {
    await clear();
    throw new DomainError("invalid", "The sign-in came back without a code; press Connect again.");
  }
  const provider = new ServerOAuth(options, true, record.redirectUrl);
  try {
    await auth(provider, {
      serverUrl: options.declaration.url,
      authorizationCode: query.code,
      ...(record.discovery?.resourceMetadataUrl
        ? { resourceMetadataUrl: new URL(record.discovery.resourceMetadataUrl) }
        : {}),
    });
  } catch (error) {
    throw new DomainError(
      "upstream",
      `MCP server "${name}": the sign-in could not be completed: ${oauthErrorText(error)}`,
    );
  } finally {
    await clear();
  }
  return name;
}

/** An error of the sign-in, in words (an OAuth error's code and description; never a token). */
export function oauthErrorText(error: unknown): string {
  if (error instanceof OAuthError)
    return `${error.errorCode}${error.message ? `: ${error.message}` : ""}`.slice(0, 500);
  return errorMessage(error).slice(0, 500);
}

async function probe(url: string): Promise<{ resourceMetadataUrl?: URL; scope?: string }> {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "ping" }),
      signal: AbortSignal.timeout(15_000),
    });
    await response.body?.cancel().catch(() => {});
    if (response.status !== 401) return {};
    const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(response);
    return { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}), ...(scope ? { scope } : {}) };
  } catch {
    // Unreachable now: discovery says why.
    return {};
  }
}

function sameText(a: string | undefined, b: string): boolean {
  if (a === undefined) return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
