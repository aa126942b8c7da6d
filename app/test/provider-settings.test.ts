import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import type { RunningApp } from "../src/app.js";
import { PASSWORD, createTestEnv, post, startTestApp, type TestEnv } from "./helpers/app.js";
import { fromPage, raw } from "./helpers/http.js";

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
        error: /knows no model/,
        reason: "invalid-config",
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
    expect(saved.json).toMatchObject({ saved: true, restartNeeded: true });
    expect(saved.json.message).toContain("Restart the assistant");
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

  it("answers 409 naming the key when config.toml was broken by hand", async () => {
    const text = readFileSync(configPath, "utf8");
    writeFileSync(configPath, text.replace('model = "claude-haiku-4-5"', "model = 5"));
    try {
      const answer = await raw(app.port, "GET", "/api/settings/provider");
      expect(answer.status).toBe(409);
      expect(answer.json.error).toMatch(/model/);
    } finally {
      writeFileSync(configPath, text);
    }
  });
});
