import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import {
  startFakeAnthropic,
  startFakeEmbeddings,
  type FakeEmbeddings,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import type { RunningApp } from "../src/app.js";
import { parseConfig } from "../src/boot/config.js";
import { PASSWORD, configFor, createTestEnv, put, startTestApp, type TestEnv } from "./helpers/app.js";

/**
 * The Settings page's "Search by meaning": `[embeddings]` and `[memory] autoRecall` read and
 * written through the owner API, each endpoint checked with one small call before it is saved.
 */
let fake: FakeLlmServer;
let embeddings: FakeEmbeddings;
let env: TestEnv;
let app: RunningApp;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  embeddings = await startFakeEmbeddings({ apiKey: "sk-embed" });
  env = await createTestEnv(configFor(fake));
  app = await startTestApp(env);
});

afterAll(async () => {
  await app?.close();
  await embeddings?.close();
  await fake?.close();
  await env?.cleanup();
});

const configText = () => readFileSync(env.env.CONFIG_PATH!, "utf8");
const read = async () =>
  (await (
    await fetch(`http://127.0.0.1:${app.port}/api/settings/embeddings`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    })
  ).json()) as Record<string, unknown>;

describe("search by meaning on the Settings page", () => {
  it("is off until set, then checked with the endpoint and written", async () => {
    expect(await read()).toMatchObject({ configured: false, apiKeySet: false, autoRecall: true });
    const saved = await put(app.port, "/api/settings/embeddings", {
      baseUrl: embeddings.url,
      model: "fake-embed-small",
      apiKey: "sk-embed",
      dimensions: 48,
      autoRecall: false,
    });
    expect(saved.status).toBe(200);
    expect(saved.body.message).toMatch(/^Saved in config.toml and checked \(.*48 dimensions answered/);
    const config = parseConfig(configText(), "config.toml");
    expect(config.embeddings).toMatchObject({
      baseUrl: embeddings.url,
      model: "fake-embed-small",
      dimensions: 48,
    });
    expect(config.memory?.autoRecall).toBe(false);
    // The key is never shown, only whether one is set; left out, it is kept.
    const shown = await read();
    expect(shown).toMatchObject({ configured: true, apiKeySet: true, dimensions: 48, autoRecall: false });
    expect(JSON.stringify(shown)).not.toContain("sk-embed");
    expect((await put(app.port, "/api/settings/embeddings", { dimensions: "" })).status).toBe(200);
    expect(parseConfig(configText(), "config.toml").embeddings).toMatchObject({ apiKey: "sk-embed" });
    expect(parseConfig(configText(), "config.toml").embeddings?.dimensions).toBeUndefined();
  });

  it("refuses an endpoint that does not answer as it should, unless saved anyway", async () => {
    const before = configText();
    const refused = await put(app.port, "/api/settings/embeddings", { apiKey: "sk-wrong" });
    expect(refused.status).toBe(409);
    expect(String(refused.body.error)).toMatch(/^Not saved: .*Incorrect API key provided/);
    expect(configText()).toBe(before);
    const forced = await put(app.port, "/api/settings/embeddings", { apiKey: "sk-wrong", saveAnyway: true });
    expect(forced.status).toBe(200);
    expect(forced.body.message).toMatch(/unchecked/);
  });

  it("refuses a bad field with its name, and turns off by removing the table", async () => {
    const bad = await put(app.port, "/api/settings/embeddings", { dimensions: -3 });
    expect(bad.status).toBe(400);
    expect(String(bad.body.error)).toContain("dimensions");
    const off = await put(app.port, "/api/settings/embeddings", { off: true });
    expect(off.status).toBe(200);
    expect(configText()).not.toContain("[embeddings]");
    expect(parseConfig(configText(), "config.toml").embeddings).toBeUndefined();
    expect(await read()).toMatchObject({ configured: false });
  });
});
