import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { silentLogger } from "@stavrobot/common";
import { startApp, type RunningApp } from "../src/app.js";
import { PASSWORD, createTestEnv, post, startTestApp, type TestEnv } from "./helpers/app.js";
import { fromPage, raw } from "./helpers/http.js";

const TELEGRAM_OWNER = 1001;

/**
 * The Settings page's API for the model provider: the key is never shown back, a choice is checked
 * with the provider before it is written, config.toml keeps its comments, a new key for the running
 * model is used at once and another model waits for a restart, which the answers say.
 */
let fake: FakeLlmServer;
let env: TestEnv;
let app: RunningApp;
let configPath: string;

const REFUSED_KEY = "sk-ant-invalid-at-start";
const GOOD_KEY = "sk-ant-api03-good-key";

function configText(url: string): string {
  return [
    "# The model and where it is served.",
    'provider = "anthropic"',
    'model = "claude-sonnet-4-5"',
    `baseUrl = "${url}"`,
    'api = "anthropic-messages"',
    "# The owner's key:",
    `apiKey = "${REFUSED_KEY}"`,
    `password = "${PASSWORD}"`,
    "[queue]",
    "maxRetries = 0",
    "",
  ].join("\n");
}

const put = (body: unknown) =>
  raw(app.port, "PUT", "/api/settings/provider", {
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

describe("provider settings API", () => {
  beforeAll(async () => {
    fake = await startFakeAnthropic();
    env = await createTestEnv(configText(fake.url));
    configPath = env.env.CONFIG_PATH as string;
    app = await startTestApp(env);
  });

  afterAll(async () => {
    await app?.close();
    await fake?.close();
    await env?.cleanup();
  });

  it("shows the provider, model and endpoint, and only whether a key is set", async () => {
    const answer = await raw(app.port, "GET", "/api/settings/provider");
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      baseUrl: fake.url,
      api: "anthropic-messages",
      keySet: true,
      subscription: false,
      restartNeeded: false,
    });
    expect(answer.json.providers).toContain("anthropic");
    expect(answer.text).not.toContain(REFUSED_KEY);
    const models = await raw(app.port, "GET", "/api/settings/provider/models?provider=anthropic");
    expect(models.json.models).toContain("claude-sonnet-4-5");
    expect((await raw(app.port, "GET", "/api/settings/provider/models?provider=nobody")).json.models).toEqual(
      [],
    );
  });

  it("is the owner's alone, and refuses a page of another site", async () => {
    expect((await raw(app.port, "GET", "/api/settings/provider", { auth: null })).status).toBe(401);
    const choice = { provider: "anthropic", model: "claude-sonnet-4-5", apiKey: GOOD_KEY };
    const foreign = await fromPage(app.port, "PUT", "/api/settings/provider", choice, "http://evil.example");
    expect(foreign.status).toBe(403);
    const restart = await fromPage(app.port, "POST", "/api/settings/restart", {}, "http://evil.example");
    expect(restart.status).toBe(403);
    expect(readFileSync(configPath, "utf8")).toBe(configText(fake.url));
  });

  it("refuses bad inputs with a clear error and leaves config.toml as it was", async () => {
    const base = {
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      baseUrl: fake.url,
      api: "anthropic-messages",
    };
    const cases: { body: unknown; status: number; error: RegExp; reason?: string }[] = [
      { body: { ...base, colour: "blue" }, status: 400, error: /colour/ },
      { body: { ...base, model: "" }, status: 400, error: /model/ },
      { body: { ...base, apiKey: "" }, status: 400, error: /apiKey.*leave it out/ },
      { body: { ...base, baseUrl: "localhost:11434" }, status: 400, error: /baseUrl/ },
      { body: { ...base, baseUrl: "ftp://example.com/v1" }, status: 400, error: /http/ },
      { body: { ...base, api: "smoke-signals" }, status: 400, error: /api/ },
      { body: { provider: "anthropic", model: "x", baseUrl: fake.url }, status: 400, error: /api.*required/ },
      {
        body: { provider: "anthropic", model: "no-such-thing-at-all" },
        status: 400,
        error: /has no model "no-such-thing-at-all"/,
        reason: "invalid-config",
      },
      {
        body: { provider: "antropic", model: "claude-sonnet-4-5" },
        status: 400,
        error: /^No provider "antropic" is known \(did you mean "anthropic"\?\)/,
        reason: "unknown-provider",
      },
      {
        body: { ...base, model: "claude-sonet-4-5", apiKey: GOOD_KEY },
        status: 400,
        error: /the provider lists no model "claude-sonet-4-5" \(did you mean "claude-sonnet-4-5-20250929"/,
        reason: "unknown-model",
      },
      {
        body: { ...base, apiKey: "sk-ant-invalid-2" },
        status: 400,
        error: /refused the key/,
        reason: "key-refused",
      },
      {
        body: { ...base, baseUrl: "http://127.0.0.1:9", apiKey: GOOD_KEY },
        status: 502,
        error: /did not answer/,
        reason: "no-answer",
      },
    ];
    for (const { body, status, error, reason } of cases) {
      const answer = await put(body);
      expect({ body, status: answer.status }).toEqual({ body, status });
      expect(answer.json.error).toMatch(error);
      if (reason) expect(answer.json.reason).toBe(reason);
    }
    const notJson = await raw(app.port, "PUT", "/api/settings/provider", {
      headers: { "Content-Type": "application/json" },
      body: "{provider",
    });
    expect(notJson.status).toBe(400);
    const form = await raw(app.port, "PUT", "/api/settings/provider", {
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: "provider=anthropic",
    });
    expect(form.status).toBe(415);
    expect(readFileSync(configPath, "utf8")).toBe(configText(fake.url));
  });

  it("uses a new key for the running model at once, and keeps config.toml's comments", async () => {
    const before = fake.requests.length;
    const saved = await put({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      baseUrl: fake.url,
      api: "anthropic-messages",
      apiKey: GOOD_KEY,
    });
    expect(saved.status).toBe(200);
    expect(saved.json).toMatchObject({ saved: true, restartNeeded: false });
    expect(saved.json.message).toContain("In use now");
    expect(saved.text).not.toContain(GOOD_KEY);
    const text = readFileSync(configPath, "utf8");
    expect(text).toBe(configText(fake.url).replace(REFUSED_KEY, GOOD_KEY));
    // The next turn sends the new key, without a restart.
    fake.enqueue(textTurn("Hello with the new key."));
    const chat = await post(app.port, "/chat", { message: "hi" });
    expect(chat.body.response).toBe("Hello with the new key.");
    const sent = fake.requests.slice(before).find((request) => request.headers?.["x-api-key"]);
    expect(sent?.headers?.["x-api-key"]).toBe(GOOD_KEY);
    const checks = await raw(app.port, "GET", "/api/checks");
    const provider = checks.json.checks.find((check: { name: string }) => check.name === "provider");
    expect(provider.state).toBe("ok");
  });

  it("writes another model for the next start, and says a restart is needed until then", async () => {
    const saved = await put({
      provider: "anthropic",
      model: "claude-haiku-4-5",
      baseUrl: fake.url,
      api: "anthropic-messages",
    });
    expect(saved.status).toBe(200);
    expect(saved.json).toMatchObject({ saved: true, restartNeeded: true, canRestart: false });
    expect(saved.json.message).toContain("It is used after a restart.");
    const shown = await raw(app.port, "GET", "/api/settings/provider");
    expect(shown.json).toMatchObject({
      model: "claude-haiku-4-5",
      keySet: true,
      restartNeeded: true,
      running: { model: "claude-sonnet-4-5" },
    });
    expect(readFileSync(configPath, "utf8")).toContain(`model = "claude-haiku-4-5"\nbaseUrl`);
    // A key left out is kept; null removes it (the fake endpoint needs none: a placeholder goes).
    const removed = await put({
      provider: "anthropic",
      model: "claude-haiku-4-5",
      baseUrl: fake.url,
      api: "anthropic-messages",
      apiKey: null,
    });
    expect(removed.status).toBe(200);
    expect(readFileSync(configPath, "utf8")).not.toContain("apiKey =");
    expect((await raw(app.port, "GET", "/api/settings/provider")).json.keySet).toBe(false);
  });

  it("offers the closest names and saving anyway for a model the provider does not list", async () => {
    const before = readFileSync(configPath, "utf8");
    const choice = {
      provider: "anthropic",
      model: "claude-sonet-4-5",
      baseUrl: fake.url,
      api: "anthropic-messages",
      apiKey: GOOD_KEY,
    };
    const refused = await put(choice);
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({ reason: "unknown-model", saveAnyway: true });
    expect(refused.json.suggestions[0]).toBe("claude-sonnet-4-5-20250929");
    expect(refused.json.error).not.toMatch(/pi-ai/);
    expect(readFileSync(configPath, "utf8")).toBe(before);
    const anyway = await put({ ...choice, saveAnyway: true });
    expect(anyway.status).toBe(200);
    expect(anyway.json).toMatchObject({ saved: true, unchecked: true, restartNeeded: true });
    expect(anyway.json.message).toContain("Saved in config.toml as it is, unchecked");
    expect(readFileSync(configPath, "utf8")).toContain('model = "claude-sonet-4-5"');
    // A choice that would not start is never saved, anyway or not.
    const broken = await put({ provider: "antropic", model: "m", saveAnyway: true });
    expect(broken.status).toBe(400);
    expect(broken.json.saveAnyway).toBeUndefined();
  });

  it("checks a server without a model list with one tiny request, leaves out an Anthropic address's /v1, and calls a 404 a wrong address", async () => {
    const unlisted = await startFakeAnthropic({ modelList: false });
    try {
      unlisted.enqueue(textTurn("H"));
      const saved = await put({
        provider: "local",
        model: "proxy-model",
        baseUrl: `${unlisted.url}/v1`,
        api: "anthropic-messages",
        apiKey: null,
      });
      expect(saved.status).toBe(200);
      expect(saved.json.check.detail).toBe(
        "local/proxy-model: reachable, no key needed (the server lists no models; it answered a one-token request)",
      );
      expect(saved.json.message).toContain(`Note: the address is taken without /v1 (${unlisted.url})`);
      expect(readFileSync(configPath, "utf8")).toContain(`baseUrl = "${unlisted.url}"\n`);
      expect(unlisted.requests.at(-1)?.body).toMatchObject({ model: "proxy-model", max_tokens: 1 });

      const wrong = await put({
        provider: "local",
        model: "proxy-model",
        baseUrl: `${unlisted.url}/nowhere`,
        api: "openai-completions",
      });
      expect(wrong.status).toBe(400);
      expect(wrong.json).toMatchObject({ reason: "wrong-address", saveAnyway: true });
      expect(wrong.json.error).toContain("the address is wrong");
      expect(wrong.json.fix).toContain("usually ends in /v1");
      expect(wrong.text).not.toContain("turns retry by themselves");
    } finally {
      await unlisted.close();
    }
  });

  it("cannot restart an app nothing can restart, and says so", async () => {
    expect((await raw(app.port, "GET", "/api/settings/provider")).json.canRestart).toBe(false);
    const restart = await raw(app.port, "POST", "/api/settings/restart", {
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    expect(restart.status).toBe(503);
    expect(restart.json.error).toContain("cannot restart itself here");
  });

  it("answers 409 naming the key when config.toml was broken by hand", async () => {
    const text = readFileSync(configPath, "utf8");
    writeFileSync(configPath, text.replace(/^model = ".*"$/m, "model = 5"));
    try {
      const answer = await raw(app.port, "GET", "/api/settings/provider");
      expect(answer.status).toBe(409);
      expect(answer.json.error).toMatch(/model/);
    } finally {
      writeFileSync(configPath, text);
    }
  });
});

describe("a provider saved while the assistant has none", () => {
  let noKey: TestEnv;
  let bare: RunningApp;
  let fakeLocal: FakeLlmServer;

  let telegram: FakeTelegram;

  beforeAll(async () => {
    fakeLocal = await startFakeAnthropic();
    telegram = await startFakeTelegram();
    // The first start's config.toml: Anthropic's model, no key anywhere; the owner on Telegram.
    // Telegram delivers to the webhook at the public address the app registers.
    const port = await freePort();
    noKey = await createTestEnv(
      `provider = "anthropic"\nmodel = "claude-sonnet-4-5"\npassword = "${PASSWORD}"\n` +
        `publicHostname = "http://127.0.0.1:${port}"\n` +
        `[owner]\nname = "Ada"\ntelegram = ${TELEGRAM_OWNER}\n` +
        `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
    );
    noKey.env.PORT = String(port);
    bare = await startTestApp(noKey);
  });

  afterAll(async () => {
    await bare?.close();
    await telegram?.close();
    await fakeLocal?.close();
    await noKey?.cleanup();
  });

  it("says on /chat and in the checks that it is used after a restart, not that no key is set", async () => {
    const before = await post(bare.port, "/chat", { message: "hi" });
    expect(before.status).toBe(503);
    expect(JSON.stringify(before.body)).toContain("no LLM provider key yet");

    const saved = await raw(bare.port, "PUT", "/api/settings/provider", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        provider: "local",
        model: "claude-sonnet-4-5",
        baseUrl: fakeLocal.url,
        api: "anthropic-messages",
      }),
    });
    expect(saved.status).toBe(200);
    expect(saved.json.restartNeeded).toBe(true);

    const after = await post(bare.port, "/chat", { message: "hi" });
    expect(after.status).toBe(503);
    const said = JSON.stringify(after.body);
    expect(said).not.toContain("no LLM provider key yet");
    expect(said).toContain("A provider saved on the Settings page is used after a restart");
    const checks = await raw(bare.port, "GET", "/api/checks");
    const provider = checks.json.checks.find((check: { name: string }) => check.name === "provider");
    expect(provider).toMatchObject({ state: "fail", restartNeeded: true });
    expect(provider.detail).toContain("config.toml holds another provider, used after a restart");
  });

  it("tells the owner on Telegram the same, not that no key is set", async () => {
    // The provider saved by the test before waits for a restart.
    await vi.waitFor(() => expect(telegram.webhook).toBeDefined());
    const from = telegram.sent.length;
    expect((await telegram.deliverUpdate(telegram.textUpdate(TELEGRAM_OWNER, "hi there"))).status).toBe(200);
    await vi.waitFor(() => expect(telegram.sent.length).toBeGreaterThan(from), { timeout: 15_000 });
    const said = telegram.sent
      .slice(from)
      .map((sent) => String(sent.params.text))
      .join("\n");
    expect(said).toContain("A provider saved on the Settings page is used after a restart");
    expect(said).not.toContain("no LLM provider key yet");
  });
});

describe("the restart the Settings page asks for", () => {
  let restartEnv: TestEnv;
  let restartable: RunningApp;
  let fakeHere: FakeLlmServer;
  let asked = 0;

  beforeAll(async () => {
    fakeHere = await startFakeAnthropic();
    restartEnv = await createTestEnv(configText(fakeHere.url));
    // What run.ts's main hands the app; here it only counts (the restart itself: the browser test).
    restartable = await startApp({ env: restartEnv.env, logger: silentLogger, restart: () => void asked++ });
  });

  afterAll(async () => {
    await restartable?.close();
    await fakeHere?.close();
    await restartEnv?.cleanup();
  });

  const restart = () =>
    raw(restartable.port, "POST", "/api/settings/restart", {
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });

  it("is offered, answers 202 and then restarts, and refuses while config.toml would not start", async () => {
    expect((await raw(restartable.port, "GET", "/api/settings/provider")).json.canRestart).toBe(true);
    const path = restartEnv.env.CONFIG_PATH as string;
    const text = readFileSync(path, "utf8");
    writeFileSync(
      path,
      text.replace('model = "claude-sonnet-4-5"', 'model = "claude-sonnet-4-5"\nmaxToolRounds = 0'),
    );
    const refused = await restart();
    expect(refused.status).toBe(409);
    expect(refused.json.error).toMatch(/^Not restarted: config\.toml would not start\. .*maxToolRounds/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(asked).toBe(0);
    writeFileSync(path, text);
    const accepted = await restart();
    expect(accepted.status).toBe(202);
    await vi.waitFor(() => expect(asked).toBe(1));
  });
});
