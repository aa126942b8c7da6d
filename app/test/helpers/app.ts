import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import { afterAll, beforeAll, expect, vi } from "vitest";
import { startFakeAnthropic, startFakeOpenAI, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../../src/app.js";
import { createTestDatabase, type TestDatabase } from "./db.js";

export const PASSWORD = "test-password-123";
export const INTERNAL_SECRET = "internal-secret-for-tests-0123456789";

export type LlmKind = "anthropic" | "openai";

/**
 * For tests of plugin management itself: the trust gate lets manage_plugins through after outside
 * text (a plugin's results earlier in the conversation); app/test/trust.test.ts tests the gate.
 */
export const TRUST_PLUGIN_MANAGEMENT = '[trust]\nallow = ["manage_plugins"]\n';

/** config.toml text pointing the app at a fake LLM server. */
export function configFor(fake: Pick<FakeLlmServer, "url">, kind: LlmKind = "anthropic", extra = ""): string {
  const llm =
    kind === "anthropic"
      ? `provider = "anthropic"\nmodel = "claude-sonnet-4-5"\nbaseUrl = "${fake.url}"\napi = "anthropic-messages"\napiKey = "sk-ant-api03-test"`
      : `provider = "local"\nmodel = "fake-model"\nbaseUrl = "${fake.url}/v1"\napi = "openai-completions"\napiKey = "test-key"\ncontextWindow = 100000\nmaxTokens = 2048`;
  return `${llm}\npassword = "${PASSWORD}"\n[queue]\nmaxRetries = 1\nretryDelaySeconds = 0\n${extra}`;
}

export interface TestEnv {
  dir: string;
  database: TestDatabase;
  env: NodeJS.ProcessEnv;
  cleanup(): Promise<void>;
}

/** A data directory, a config file and a fresh database; the same env can start the app again. */
export async function createTestEnv(config: string): Promise<TestEnv> {
  const dir = mkdtempSync(join(tmpdir(), "stavrobot-test-"));
  mkdirSync(join(dir, "main"), { recursive: true });
  writeFileSync(join(dir, "main", "config.toml"), config);
  const database = await createTestDatabase();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TZ: "UTC",
    DATA_DIR: dir,
    CONFIG_PATH: join(dir, "main", "config.toml"),
    PORT: "0",
    INTERNAL_PORT: "0",
    STAVROBOT_INTERNAL_SECRET: INTERNAL_SECRET,
    ...database.env,
  };
  return {
    dir,
    database,
    env,
    async cleanup() {
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function startTestApp(testEnv: TestEnv): Promise<RunningApp> {
  return startApp({ env: testEnv.env, logger: silentLogger });
}

export interface ChatCall {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

export async function post(
  port: number,
  path: string,
  body: unknown,
  auth: string | null = basicAuthHeader(PASSWORD),
  rawBody?: string | Buffer,
): Promise<ChatCall> {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (auth) headers.Authorization = auth;
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: "POST",
    headers,
    body: rawBody ?? JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { raw: text };
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

export const chat = (app: Pick<RunningApp, "port">, message: string): Promise<ChatCall> =>
  post(app.port, "/chat", { message, source: "cli" });

/**
 * A message handed over on the internal port as the plugin-runner hands over an async result
 * (its secret, the answer not awaited): answered 202 once accepted.
 */
export async function handOver(
  app: Pick<RunningApp, "internalPort">,
  body: Record<string, unknown>,
  secret = INTERNAL_SECRET,
): Promise<Response> {
  const response = await fetch(`http://127.0.0.1:${app.internalPort}/chat`, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Authorization: `Bearer ${secret}`,
      Prefer: "respond-async",
    },
    body: JSON.stringify(body),
  });
  await response.arrayBuffer();
  return response;
}

/** A JSON PUT with the owner's password; unlike `post`, it fails on an answer that is not JSON. */
export async function put(
  port: number,
  path: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: "PUT",
    headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Waits until no turn runs or waits and the outbox has sent everything it holds. */
export async function quiet(app: RunningApp): Promise<void> {
  await vi.waitFor(
    async () => {
      await app.queue.idle();
      const open = await app.db.query(
        `SELECT 1 FROM inbox WHERE status IN ('pending', 'processing')
         UNION ALL SELECT 1 FROM deliveries WHERE status = 'pending'`,
      );
      expect(open.rows).toHaveLength(0);
    },
    { timeout: 20_000 },
  );
}

export interface AppFixture {
  fake: FakeLlmServer;
  env: TestEnv;
  app: RunningApp;
}

/**
 * For a test file (or describe block): a fake LLM server, a fresh database and the app, started
 * before the tests and torn down after. Fields are filled in by the time the tests run.
 */
export function useTestApp(
  options: { kind?: LlmKind; config?: (fake: FakeLlmServer) => string } = {},
): AppFixture {
  const kind = options.kind ?? "anthropic";
  const fixture = {} as AppFixture;
  beforeAll(async () => {
    fixture.fake = kind === "anthropic" ? await startFakeAnthropic() : await startFakeOpenAI();
    fixture.env = await createTestEnv(
      options.config ? options.config(fixture.fake) : configFor(fixture.fake, kind),
    );
    fixture.app = await startTestApp(fixture.env);
  });
  afterAll(async () => {
    await fixture.app?.close();
    await fixture.fake?.close();
    await fixture.env?.cleanup();
  });
  return fixture;
}
