import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Logger } from "@stavrobot/common";
import { makeTempRoot, startPluginHost, uniqueName, type TestPluginHost } from "./helpers.js";
import { startOAuthFixture, type OAuthFixture } from "./mcp/oauth-fixture.js";

/**
 * A remote MCP server behind OAuth 2.1, through the runner's routes: the owner's Connect
 * (discovery from the 401, registration, PKCE, the authorize step followed as a browser does),
 * the tool call with the token, refresh before expiry, a lapsed sign-in shown, and every bad
 * return from the authorization server refused with a clear error. Tokens appear nowhere else.
 */
const name = uniqueName("mcp-oauth");
const keyed = uniqueName("mcp-keyed");
const KEY = "key-4f1b7c-refused";
const REDIRECT = "http://127.0.0.1:9/oauth/mcp/callback";
const lines: string[] = [];
function collecting(): Logger {
  const log =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void =>
      void lines.push(`${level} ${message} ${fields ? JSON.stringify(fields) : ""}`);
  return {
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    child: () => collecting(),
  };
}

let fixture: OAuthFixture;
let host: TestPluginHost;
let root: string;
const seen: string[] = [];

beforeAll(async () => {
  root = makeTempRoot("mcp-oauth");
  fixture = await startOAuthFixture();
  // Each access token lives 30 s, under the client's one-minute margin: every use refreshes first.
  fixture.expiresIn = 30;
  const file = join(root, "mcp-servers.json");
  writeFileSync(
    file,
    JSON.stringify({
      [name]: { type: "http", url: fixture.url, startTimeoutSeconds: 10 },
      // As other hosts' READMEs declare a server that takes an API key: never an OAuth sign-in.
      [keyed]: { type: "http", url: fixture.url, startTimeoutSeconds: 10, headers: { "X-API-Key": KEY } },
    }),
  );
  host = await startPluginHost({ root: join(root, "host"), mcpServersFile: file, logger: collecting() });
}, 60_000);

afterAll(async () => {
  await host?.close();
  await host?.host.isolation.removeUser(name);
  await host?.host.isolation.removeUser(keyed);
  await fixture?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const request = async (method: string, path: string, body?: unknown) => {
  const answer = await host.request(method, path, body);
  seen.push(JSON.stringify(answer.body));
  return answer;
};
const status = async () =>
  ((await request("GET", `/bundles/${name}`)).body as { server: { state: string; signIn?: string } }).server;

/** The owner's browser: opens the authorization page and is sent back to the app's callback. */
async function authorize(authorizationUrl: string): Promise<URLSearchParams> {
  const answer = await fetch(authorizationUrl, { redirect: "manual" });
  expect(answer.status).toBe(302);
  const back = new URL(answer.headers.get("location") ?? "");
  expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
  return back.searchParams;
}

async function connect(): Promise<string> {
  const started = await request("POST", "/mcp/oauth/start", { name, redirectUrl: REDIRECT });
  expect(started.status).toBe(200);
  return (started.body as { authorizationUrl: string }).authorizationUrl;
}

describe("an MCP server behind OAuth", () => {
  it("is shown as needing sign-in before the owner connects it, on its card and in /health", async () => {
    await vi.waitFor(async () => expect((await status()).signIn).toBe("needed"), { timeout: 20_000 });
    const health = (await request("GET", "/health")).body as {
      mcpServersFailing?: { name: string; signIn?: string; lastError?: string }[];
    };
    const failing = health.mcpServersFailing?.find((server) => server.name === name);
    expect(failing?.signIn).toBe("needed");
    expect(failing?.lastError).toContain("needs the owner to sign in");
  });

  it("refuses a callback without state, or with a state no Connect is waiting for", async () => {
    const missing = await request("POST", "/mcp/oauth/finish", { code: "x" });
    expect(missing.status).toBe(400);
    expect((missing.body as { error: string }).error).toBe(
      "The sign-in came back without its state; press Connect again.",
    );
    await connect();
    const wrong = await request("POST", "/mcp/oauth/finish", { state: "forged-state", code: "x" });
    expect(wrong.status).toBe(400);
    expect((wrong.body as { error: string }).error).toContain("a state no Connect is waiting for");
  });

  it("reports the authorization server's refusal and forgets that Connect", async () => {
    fixture.authorizeError = "access_denied";
    const back = await authorize(await connect());
    fixture.authorizeError = undefined;
    expect(back.get("code")).toBeNull();
    const query = Object.fromEntries(back);
    const refused = await request("POST", "/mcp/oauth/finish", query);
    expect(refused.status).toBe(400);
    expect((refused.body as { error: string }).error).toBe(
      `The authorization server of MCP server "${name}" refused the sign-in: access_denied.`,
    );
    const again = await request("POST", "/mcp/oauth/finish", query);
    expect((again.body as { error: string }).error).toContain("a state no Connect is waiting for");
  });

  it("signs in with discovery, registration and PKCE, then calls a tool with the token, refreshing it first", async () => {
    const authorizationUrl = new URL(await connect());
    expect(authorizationUrl.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorizationUrl.searchParams.get("resource")).toBe(fixture.url);
    expect(fixture.registrations).toBeGreaterThanOrEqual(1);
    const back = await authorize(authorizationUrl.href);
    const done = await request("POST", "/mcp/oauth/finish", Object.fromEntries(back));
    expect(done.status).toBe(200);
    expect(done.body).toEqual({ name, message: `MCP server "${name}" is signed in.` });
    // Shown signed in at once, the error that asked for it gone, before any refresh could say so.
    const signedIn = await status();
    expect(signedIn.signIn).toBe("ok");
    expect((signedIn as { lastError?: string }).lastError).toBeUndefined();
    await vi.waitFor(async () => expect((await status()).state).toBe("running"), { timeout: 20_000 });
    expect((await status()).signIn).toBe("ok");
    const firstAccess = fixture.issued[0];
    const result = await request("POST", `/bundles/${name}/tools/whoami/run`, {});
    expect(result.body).toMatchObject({ success: true, output: "you are signed in" });
    // The token the code bought was near its expiry: the calls came with refreshed ones.
    expect(fixture.refreshes).toBeGreaterThanOrEqual(1);
    expect(fixture.calls.length).toBe(1);
    expect(fixture.calls).not.toContain(firstAccess);
    const stateFile = join(host.stateDir, "mcp-oauth.json");
    expect(statSync(stateFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(stateFile, "utf8")).toContain(fixture.calls[0]);
  });

  it("shows a sign-in that lapsed (refresh refused) as needing sign-in, and the call says so", async () => {
    fixture.refuseRefresh = true;
    fixture.revokeAll();
    const result = await request("POST", `/bundles/${name}/tools/whoami/run`, {});
    expect(result.body).toMatchObject({ success: false });
    expect((result.body as { error: string }).error).toContain("needs the owner to sign in");
    await vi.waitFor(async () => expect((await status()).signIn).toBe("needed"), { timeout: 20_000 });
    fixture.refuseRefresh = false;
  });

  it("refuses a malformed protected-resource metadata document with a clear error", async () => {
    const good = fixture.resourceMetadata;
    fixture.resourceMetadata = { resource: 42, authorization_servers: "not a list" };
    const started = await request("POST", "/mcp/oauth/start", { name, redirectUrl: REDIRECT });
    fixture.resourceMetadata = good;
    expect(started.status).toBe(502);
    expect((started.body as { error: string }).error).toMatch(
      new RegExp(
        `^MCP server "${name}": sign-in could not start: its protected-resource metadata \\(http://127\\.0\\.0\\.1:\\d+/\\.well-known/oauth-protected-resource/mcp\\) is not usable: `,
      ),
    );
  });

  it("reports a code the authorization server refuses at the token endpoint", async () => {
    const back = await authorize(await connect());
    const refused = await request("POST", "/mcp/oauth/finish", {
      state: back.get("state"),
      code: "not-the-code",
    });
    expect(refused.status).toBe(502);
    expect((refused.body as { error: string }).error).toBe(
      `MCP server "${name}": the sign-in could not be completed: invalid_grant`,
    );
  });

  it("says a server declared with an API key header refused it, and offers no sign-in", async () => {
    const keyedStatus = async () =>
      (
        (await request("GET", `/bundles/${keyed}`)).body as {
          server: { state: string; signIn?: string; lastError?: string };
        }
      ).server;
    await vi.waitFor(async () => expect((await keyedStatus()).state).toBe("failed"), { timeout: 20_000 });
    const server = await keyedStatus();
    expect(server.signIn).toBeUndefined();
    expect(server.lastError).toContain(
      `the server refused the headers it was given (X-API-Key); check their values in [mcpServers.${keyed}.headers]`,
    );
    expect(server.lastError).not.toContain(KEY);
    const started = await request("POST", "/mcp/oauth/start", { name: keyed, redirectUrl: REDIRECT });
    expect(started.status).toBe(400);
  });

  it("refuses a Connect for a server that is not declared", async () => {
    const answer = await request("POST", "/mcp/oauth/start", {
      name: "no-such-server",
      redirectUrl: REDIRECT,
    });
    expect(answer.status).toBe(404);
    expect((answer.body as { error: string }).error).toBe('No MCP server "no-such-server" is declared.');
  });

  it("never shows a token in a result, a listing, /health or a log line", async () => {
    expect(fixture.issued.length).toBeGreaterThan(2);
    seen.push(JSON.stringify((await request("GET", "/bundles")).body));
    const everything = [...seen, ...lines].join("\n");
    for (const token of fixture.issued) expect(everything).not.toContain(token);
  });
});
