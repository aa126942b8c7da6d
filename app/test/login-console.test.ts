import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { OAuthCredentials } from "@mariozechner/pi-ai/oauth";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import { freePort, startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { NO_KEY_REASONS } from "../src/auth/oauth-keys.js";
import { PASSWORD, chat, createTestEnv, type TestEnv } from "./helpers/app.js";
import { startFakeOAuth, type FakeOAuth } from "./helpers/fake-oauth.js";
import { rerouteFetch } from "./helpers/reroute-fetch.js";

/**
 * An owner with no push channel: a broken authFile at start, credentials put there by hand (and
 * renewed), and the login link after a 401 left on the console. pi-ai's real Anthropic provider
 * throughout, pointed at loopback servers (see login.test.ts).
 */
const NOTICE = "was refused by the provider (HTTP 401) and has been removed";

let llm: FakeLlmServer;
let oauth: FakeOAuth;
let restoreFetch: () => void;
let env: TestEnv;
let app: RunningApp;
let authFile: string;
let base: string;

beforeAll(async () => {
  llm = await startFakeAnthropic();
  oauth = await startFakeOAuth();
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
      `publicHostname = "${base}"\n[queue]\nmaxRetries = 1\nretryDelaySeconds = 0\n`,
  );
  writeFileSync(authFile, '{"anthropic": {"access": ');
  env.env.PORT = String(port);
  app = await startApp({ env: env.env, logger: silentLogger });
});

afterAll(async () => {
  await app?.close();
  restoreFetch?.();
  await oauth?.close();
  await llm?.close();
  await env?.cleanup();
});

async function pendingAnswers(): Promise<{ id: number; source: string | null; response: string }[]> {
  const response = await fetch(`${base}/api/answers/pending`, {
    headers: { Authorization: basicAuthHeader(PASSWORD) },
  });
  return ((await response.json()) as { answers: { id: number; source: string | null; response: string }[] })
    .answers;
}

describe("a subscription login, for an owner without a push channel", () => {
  it("starts with an unreadable authFile, and a message says what is wrong", async () => {
    expect((await fetch(`${base}/health`)).status).toBe(200);
    const answer = await chat(app, "Hello?");
    expect(answer.body.response).toBe(
      `Something went wrong: Authentication required. Visit ${base}/login to log in. (${NO_KEY_REASONS.unreadable})`,
    );
    expect(llm.requests).toHaveLength(0);
  });

  it("uses credentials written into authFile by hand without a restart, renewing expired ones", async () => {
    const grant = oauth.grant();
    writeFileSync(authFile, JSON.stringify({ anthropic: { ...grant, expires: Date.now() - 1000 } }));
    llm.enqueue(textTurn("Renewed and answering."));
    expect((await chat(app, "Now?")).body.response).toBe("Renewed and answering.");
    const renewed = (JSON.parse(readFileSync(authFile, "utf8")) as Record<string, OAuthCredentials>)
      .anthropic;
    expect(renewed?.refresh).not.toBe(grant.refresh);
    expect(renewed?.expires).toBeGreaterThan(Date.now());
    expect(statSync(authFile).mode & 0o777).toBe(0o600);
    expect(llm.requests.at(-1)?.headers.authorization).toBe(`Bearer ${renewed?.access}`);
  });

  it("after a 401, leaves the login link on the console, shown once", async () => {
    llm.enqueue({
      content: [],
      error: {
        status: 401,
        body: { type: "error", error: { type: "authentication_error", message: "Invalid" } },
      },
    });
    const refused = await chat(app, "Still there?");
    expect(refused.body.response).toBe("Something went wrong: Invalid (HTTP 401)");
    // A failed turn says so beside its text, so a client can tell it from an answer.
    expect(refused.body.failed).toBe(true);
    expect(JSON.parse(readFileSync(authFile, "utf8"))).toEqual({});

    // (The 401 reply itself may still be listed for a moment: it is marked seen once its response is sent.)
    const pending = (await pendingAnswers()).filter((answer) => answer.source === "login");
    expect(pending).toEqual([expect.objectContaining({ response: expect.stringContaining(NOTICE) })]);
    expect(pending[0]?.response).toContain(`log in again: ${base}/login`);

    // The next console reply carries it (and says why there is no answer); after that it is gone.
    const next = await chat(app, "Hello?");
    expect(next.body.response).toContain(NOTICE);
    expect(next.body.response).toContain(NO_KEY_REASONS.revoked);
    await vi.waitFor(async () => expect(await pendingAnswers()).toEqual([]));
    const after = await chat(app, "Hello??");
    expect(after.body.response).not.toContain(NOTICE);
    const notices = await app.db.query("SELECT 1 FROM inbox WHERE source = 'login'");
    expect(notices.rows).toHaveLength(1);
  });
});
