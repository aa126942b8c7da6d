import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { OAuthCredentials } from "@mariozechner/pi-ai/oauth";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  parseTelegramHtml,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { NO_KEY_REASONS } from "../src/auth/oauth-keys.js";
import { PASSWORD, chat, createTestEnv, post, type TestEnv } from "./helpers/app.js";
import { startFakeOAuth, type FakeOAuth } from "./helpers/fake-oauth.js";
import { rerouteFetch } from "./helpers/reroute-fetch.js";
import { openSse, type SseStream } from "./helpers/sse.js";

/**
 * The subscription login end to end, with pi-ai's real Anthropic provider: its PKCE login and
 * token refresh talk to a loopback OAuth server, the model to the fake Anthropic API (see
 * rerouteFetch for why `fetch` is where they are pointed there). The config is what an owner
 * writes: provider, model and authFile, no baseUrl.
 */
const OWNER = 1001;
const AUTH = { Authorization: basicAuthHeader(PASSWORD) };

let llm: FakeLlmServer;
let oauth: FakeOAuth;
let telegram: FakeTelegram;
let restoreFetch: () => void;
let env: TestEnv;
let app: RunningApp;
let authFile: string;
let base: string;
const streams: SseStream[] = [];

beforeAll(async () => {
  llm = await startFakeAnthropic();
  oauth = await startFakeOAuth();
  telegram = await startFakeTelegram();
  restoreFetch = rerouteFetch({
    "https://api.anthropic.com": llm.url,
    "https://platform.claude.com": oauth.url,
  });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  env = await createTestEnv("");
  authFile = join(env.dir, "main", "auth.json");
  writeFileSync(
    env.env.CONFIG_PATH as string,
    `provider = "anthropic"\nmodel = "claude-sonnet-4-5"\nauthFile = "${authFile}"\npassword = "${PASSWORD}"\n` +
      `publicHostname = "${base}"\n[queue]\nmaxRetries = 1\nretryDelaySeconds = 0\n` +
      `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
      `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
  );
  // Credentials that expired, with a refresh token the provider does not know (revoked elsewhere).
  writeFileSync(
    authFile,
    JSON.stringify({ anthropic: { access: "sk-ant-oat01-old", refresh: "sk-ant-ort01-gone", expires: 1 } }),
  );
  env.env.PORT = String(port);
  app = await startApp({ env: env.env, logger: silentLogger });
});

afterAll(async () => {
  for (const stream of streams) stream.close();
  await app?.close();
  restoreFetch?.();
  await telegram?.close();
  await oauth?.close();
  await llm?.close();
  await env?.cleanup();
});

async function events(): Promise<SseStream> {
  const stream = await openSse(`${base}/login/events`, AUTH);
  streams.push(stream);
  return stream;
}

function saved(): Record<string, OAuthCredentials> {
  return JSON.parse(readFileSync(authFile, "utf8")) as Record<string, OAuthCredentials>;
}

/** The owner's Telegram messages, as a client shows them. */
function toOwner(): string[] {
  return telegram.sent
    .filter((sent) => String(sent.params.chat_id) === String(OWNER))
    .map((sent) => {
      const text = String(sent.params.text ?? "");
      return sent.params.parse_mode === "HTML" ? parseTelegramHtml(text) : text;
    });
}

async function outboxEmpty(): Promise<void> {
  await vi.waitFor(async () => {
    const open = await app.db.query("SELECT 1 FROM deliveries WHERE status = 'pending'");
    expect(open.rows).toHaveLength(0);
  });
}

describe("a subscription login (authFile)", () => {
  it("that cannot be renewed does not stop the app, and a message gets a clear answer", async () => {
    expect((await fetch(`${base}/health`)).status).toBe(200);
    const answer = await chat(app, "Hello?");
    expect(answer.status).toBe(200);
    expect(answer.body.response).toBe(
      `Something went wrong: Authentication required. Visit ${base}/login to log in. (${NO_KEY_REASONS.refused})`,
    );
    expect(llm.requests).toHaveLength(0);
    // Tried (at start, and for the message), refused each time.
    expect(oauth.tokenRequests.length).toBeGreaterThan(0);
    expect(oauth.tokenRequests.every((body) => body.refresh_token === "sk-ant-ort01-gone")).toBe(true);
  });

  it("is the Provider subscription page, with the navigation, behind the owner's password; /login leads there", async () => {
    expect((await fetch(`${base}/login`)).status).toBe(401);
    expect((await fetch(`${base}/login/events`)).status).toBe(401);
    expect((await fetch(`${base}/settings/subscription`)).status).toBe(401);
    // The address the assistant's messages and earlier versions give still works.
    const old = await fetch(`${base}/login`, { headers: AUTH, redirect: "manual" });
    expect(old.status).toBe(302);
    expect(old.headers.get("location")).toBe("/settings/subscription");
    const page = await fetch(`${base}/login`, { headers: AUTH });
    expect(page.url).toBe(`${base}/settings/subscription`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await page.text();
    expect(html).toContain("<title>Provider subscription · Stavrobot</title>");
    expect(html).toContain("forbid using the tokens of a subscription");
    expect(html).toContain('aria-label="Main"');
    expect(html).toContain('<a href="/settings/subscription">Subscription</a>');
    expect(html).not.toContain(">Login<");
    expect(html).toContain('<script type="module" src="/assets/js/subscription.js"></script>');
    expect(html).not.toMatch(/<script>|<style>| on\w+=/);
    const script = await fetch(`${base}/assets/js/subscription.js`, { headers: AUTH });
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(await script.text()).toContain('new EventSource("/login/events")');
    // The standalone page's own files are gone.
    expect((await fetch(`${base}/login/login.js`, { headers: AUTH })).status).toBe(404);
  });

  it("refuses an answer when no login asks for one (409) and a malformed one (400)", async () => {
    const none = await post(app.port, "/login/respond", { value: "code#state" });
    expect(none).toMatchObject({ status: 409, body: { error: "No pending prompt" } });
    expect((await post(app.port, "/login/respond", { code: "x" })).status).toBe(400);
    expect((await post(app.port, "/login/respond", { value: 42 })).status).toBe(400);
    expect((await post(app.port, "/login/respond", undefined, undefined, "{not json")).status).toBe(400);
  });

  it("logs in with Anthropic's PKCE flow from the page's events; a page that reconnects gets the last state", async () => {
    const first = await events();
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(await first.next("start")).toEqual({ provider: "anthropic", name: "Anthropic (Claude Pro/Max)" });
    const auth = await first.next("auth");
    const authorizeUrl = new URL(String(auth.url));
    expect(authorizeUrl.origin + authorizeUrl.pathname).toBe("https://claude.ai/oauth/authorize");
    expect(authorizeUrl.searchParams.get("code_challenge_method")).toBe("S256");
    expect(await first.next("prompt")).toMatchObject({ message: expect.stringContaining("Paste") });

    // The page reloads: the same login, its state so far.
    first.close();
    const second = await events();
    await second.next("prompt");
    expect(second.events.map((event) => event.type)).toEqual(["start", "auth", "prompt"]);
    expect(second.events[1]?.data).toEqual(auth);

    // The owner approves at the provider, which sends their browser to the redirect address; they paste it.
    const redirect = oauth.approve(authorizeUrl.href);
    expect(await post(app.port, "/login/respond", { value: redirect })).toMatchObject({
      status: 200,
      body: { ok: true },
    });
    expect(await second.next("success")).toEqual({
      provider: "anthropic",
      name: "Anthropic (Claude Pro/Max)",
    });
    await second.ended;
    expect(oauth.tokenRequests.at(-1)).toMatchObject({
      grant_type: "authorization_code",
      code_verifier: authorizeUrl.searchParams.get("state"),
    });
    expect(statSync(authFile).mode & 0o777).toBe(0o600);
    const credentials = saved().anthropic;
    expect(credentials?.access).toMatch(/^sk-ant-oat01-/);
    expect((await post(app.port, "/login/respond", { value: redirect })).status).toBe(409);

    // The next message uses the login at once, as an OAuth token.
    llm.enqueue(textTurn("Logged in and answering."));
    expect((await chat(app, "Are you there?")).body.response).toBe("Logged in and answering.");
    expect(llm.requests.at(-1)?.headers.authorization).toBe(`Bearer ${credentials?.access}`);
  });

  it("also completes when the browser reaches pi-ai's callback address itself", async () => {
    const stream = await events();
    const auth = await stream.next("auth");
    await stream.next("prompt");
    const callback = new URL(oauth.approve(String(auth.url)));
    callback.hostname = "127.0.0.1";
    expect((await fetch(callback)).status).toBe(200);
    await stream.next("success");
    // The question the page showed is withdrawn with the login.
    expect((await post(app.port, "/login/respond", { value: "x" })).status).toBe(409);
    llm.enqueue(textTurn("Still here."));
    expect((await chat(app, "And now?")).body.response).toBe("Still here.");
    expect(llm.requests.at(-1)?.headers.authorization).toBe(`Bearer ${saved().anthropic?.access}`);
  });

  it("refused by the provider (401) is removed, and the owner gets the login link on Telegram once", async () => {
    await outboxEmpty();
    const before = toOwner().length;
    llm.enqueue({
      content: [],
      error: {
        status: 401,
        body: {
          type: "error",
          error: { type: "authentication_error", message: "OAuth token has been revoked." },
        },
      },
    });
    const refused = await chat(app, "One more thing");
    expect(refused.body.response).toBe("Something went wrong: OAuth token has been revoked. (HTTP 401)");
    expect(saved().anthropic).toBeUndefined();
    await outboxEmpty();
    expect(toOwner().slice(before)).toEqual([expect.stringContaining(`log in again: ${base}/login`)]);

    // No key now: the turn says why without asking the provider, and no second link goes out.
    const requests = llm.requests.length;
    const next = await chat(app, "Hello again");
    expect(next.body.response).toBe(
      `Something went wrong: Authentication required. Visit ${base}/login to log in. (${NO_KEY_REASONS.revoked})`,
    );
    expect(llm.requests).toHaveLength(requests);
    await outboxEmpty();
    expect(toOwner().slice(before)).toHaveLength(1);
  });
});
