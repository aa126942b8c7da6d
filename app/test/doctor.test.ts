import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  textTurn,
  startFakeAnthropic,
  startFakeEmbeddings,
  startFakeTelegram,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { getModels } from "@mariozechner/pi-ai";
import { startApp, type RunningApp } from "../src/app.js";
import { signalChannel } from "../src/channels/signal/channel.js";
import { backupCheck, type Check, type Checked } from "../src/doctor/checks.js";
import { providerCheck } from "../src/doctor/provider.js";
import { NO_KEY } from "../src/model/model.js";
import { acquireInstanceLock } from "../src/boot/instance-lock.js";
import { SECRET, startPluginHost, type TestPluginHost } from "../../plugin-runner/test/helpers.js";
import { PASSWORD, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { freePort, repoRoot } from "./helpers/process.js";

/**
 * `npm run doctor` and `GET /health?deep=1` against real parts: the plugin-runner in-process, a
 * python-runner that is not running, Telegram's fake Bot API, the fake Anthropic API's model list.
 */
let fake: FakeLlmServer;
let telegram: FakeTelegram;
let runner: TestPluginHost;
let env: TestEnv;
let app: RunningApp;
let port: number;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  telegram = await startFakeTelegram();
  runner = await startPluginHost({ isolation: false });
  port = await freePort();
  const config = configFor(
    fake,
    "anthropic",
    `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
  ).replace(/^\[queue\]/m, `publicHostname = "http://127.0.0.1:${port}"\n[queue]`);
  env = await createTestEnv(config);
  app = await startApp({
    env: {
      ...env.env,
      PORT: String(port),
      PLUGIN_RUNNER_URL: runner.url,
      // Nothing listens on the discard port: the python-runner is down.
      PYTHON_RUNNER_URL: "http://127.0.0.1:9",
      STAVROBOT_INTERNAL_SECRET: SECRET,
    },
    logger: silentLogger,
    // The doctor finds the app through the data directory's lock, as it finds one `npm start` runs.
    instanceLock: await acquireInstanceLock(env.dir),
  });
  await vi.waitFor(() => expect(telegram.webhook?.url).toBe(`http://127.0.0.1:${port}/telegram/webhook`));
});

afterAll(async () => {
  await app?.close();
  await runner?.close();
  await telegram?.close();
  await fake?.close();
  await env?.cleanup();
  if (runner) rmSync(runner.root, { recursive: true, force: true });
});

const byName = (checked: { checks: Check[] }, name: string) =>
  checked.checks.find((check) => check.name === name);

/** Runs `npm run doctor` without blocking this process, where the app under test runs too. */
function doctor(extraEnv: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      "npm",
      ["run", "--silent", "doctor"],
      { cwd: repoRoot, env: { ...process.env, ...extraEnv }, encoding: "utf8", timeout: 60_000 },
      (error, stdout, stderr) => {
        const status = error ? (typeof error.code === "number" ? error.code : null) : 0;
        resolve({ status, stdout: stdout + stderr });
      },
    );
  });
}

describe("GET /health?deep=1", () => {
  it("stays open and plain without deep=1, and needs the owner's password with it", async () => {
    const plain = await fetch(`http://127.0.0.1:${port}/health`);
    expect(await plain.json()).toEqual({ status: "ok" });
    const anonymous = await fetch(`http://127.0.0.1:${port}/health?deep=1`);
    expect(anonymous.status).toBe(401);
  });

  it("says what works and what fails, each failure with what to do", async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/health?deep=1`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    // The python-runner is down: a failure, so 503 for a monitor.
    expect(answer.status).toBe(503);
    const checked = (await answer.json()) as Checked;
    expect(checked.status).toBe("fail");
    expect(byName(checked, "database")).toMatchObject({ state: "ok" });
    expect(byName(checked, "database")?.detail).toMatch(
      /(PostgreSQL server|embedded database \(PGlite\)), \d+/,
    );
    expect(byName(checked, "plugin-runner")).toMatchObject({ state: "ok" });
    expect(byName(checked, "python-runner")).toMatchObject({ state: "fail" });
    expect(byName(checked, "python-runner")?.fix).toContain("npm start restarts it");
    expect(byName(checked, "provider")).toEqual({
      name: "provider",
      state: "ok",
      detail: "anthropic/claude-sonnet-4-5: reachable, the key is accepted",
    });
    expect(byName(checked, "telegram")).toEqual({
      name: "telegram",
      state: "ok",
      detail: "the bot answers and its webhook is registered",
    });
    expect(byName(checked, "disk")?.state).not.toBe("fail");
    expect(byName(checked, "backups")).toMatchObject({ state: "warn" });
    // Signal is not configured: no line for it.
    expect(byName(checked, "signal")).toBeUndefined();
    // Embeddings are not configured: what setting them adds.
    expect(byName(checked, "embeddings")).toMatchObject({ state: "ok" });
    expect(byName(checked, "embeddings")?.detail).toMatch(
      /^not configured: db_search finds the words used\. Add \[embeddings\] to config\.toml .*finds what was meant/,
    );
  });

  it("fails Telegram when its webhook is not this assistant's, saying what to set", async () => {
    await fetch(`${telegram.url}/bot${FAKE_TELEGRAM_TOKEN}/deleteWebhook`, { method: "POST" });
    const answer = await fetch(`http://127.0.0.1:${port}/health?deep=1`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    const check = byName((await answer.json()) as Checked, "telegram");
    expect(check).toMatchObject({ state: "fail" });
    expect(check?.fix).toContain("publicHostname");
  });
});

describe("npm run doctor", () => {
  it("asks the running app, prints each check with its fix, and exits 1 when one fails", async () => {
    const result = await doctor(env.env);
    expect(result.status).toBe(1);
    expect(result.stdout).toMatch(/^ok +config\b/m);
    expect(result.stdout).toMatch(/^ok +provider +anthropic\/claude-sonnet-4-5: reachable/m);
    expect(result.stdout).toMatch(/^FAIL +python-runner +does not answer/m);
    expect(result.stdout).toContain("→ npm start restarts it by itself");
    expect(result.stdout).toContain("Something needs fixing");
  });

  it("says the app is not running, and what it checks without it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-doctor-"));
    try {
      mkdirSync(join(dir, "main"));
      writeFileSync(join(dir, "main", "config.toml"), configFor(fake));
      const result = await doctor({ DATA_DIR: dir, CONFIG_PATH: join(dir, "main", "config.toml") });
      expect(result.status).toBe(1);
      expect(result.stdout).toMatch(/^ok +config\b/m);
      expect(result.stdout).toMatch(/^FAIL +app +not running on /m);
      expect(result.stdout).toContain("→ Start it with npm start");
      // The provider is asked with config.toml's model and key, as the next start would ask it.
      expect(result.stdout).toMatch(
        /^ok +provider +anthropic\/claude-sonnet-4-5: reachable, the key is accepted$/m,
      );
      expect(result.stdout).toMatch(/^(ok|warn) +disk\b/m);
      expect(result.stdout).toMatch(/^warn +backups +no backup in /m);
      expect(result.stdout).toMatch(/^ok +embeddings +not configured: db_search finds the words used\./m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("checks [embeddings] with one small call while the app is not running, naming a refused key", async () => {
    const embeddings = await startFakeEmbeddings({ apiKey: "sk-embed" });
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-doctor-"));
    try {
      mkdirSync(join(dir, "main"));
      const section = (key: string) =>
        `[embeddings]\nbaseUrl = "${embeddings.url}"\napiKey = "${key}"\nmodel = "fake-embed"\ndimensions = 24\n`;
      const env = { DATA_DIR: dir, CONFIG_PATH: join(dir, "main", "config.toml") };
      writeFileSync(env.CONFIG_PATH, configFor(fake, "anthropic", section("sk-embed")));
      const working = await doctor(env);
      expect(working.stdout).toMatch(
        /^ok +embeddings +127\.0\.0\.1:\d+:fake-embed:24, 24 dimensions answered; the index is kept by the running app\.$/m,
      );
      expect(embeddings.inputs()).toEqual(["doctor"]);
      writeFileSync(env.CONFIG_PATH, configFor(fake, "anthropic", section("sk-wrong")));
      const refused = await doctor(env);
      expect(refused.stdout).toMatch(/^FAIL +embeddings +.*refused the key \(HTTP 401/m);
      expect(refused.stdout).toContain("→ Correct [embeddings] in config.toml and restart");
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await embeddings.close();
    }
  });

  it("says a key the provider refuses while the app is stopped, and where to change it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-doctor-"));
    try {
      mkdirSync(join(dir, "main"));
      const configPath = join(dir, "main", "config.toml");
      writeFileSync(configPath, configFor(fake).replace("sk-ant-api03-test", "sk-ant-api03-invalid"));
      const result = await doctor({ DATA_DIR: dir, CONFIG_PATH: configPath });
      expect(result.status).toBe(1);
      expect(result.stdout).toMatch(/^FAIL +app +not running on /m);
      expect(result.stdout).toMatch(
        /^FAIL +provider +anthropic\/claude-sonnet-4-5: the provider refused the key \(401\)$/m,
      );
      expect(result.stdout).toContain(`→ Check apiKey in ${configPath}: the provider does not accept it.`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("names what is wrong in an invalid config", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-doctor-"));
    try {
      mkdirSync(join(dir, "main"));
      writeFileSync(join(dir, "main", "config.toml"), configFor(fake) + "\nmaxToolRounds = 0\n");
      const result = await doctor({ DATA_DIR: dir, CONFIG_PATH: join(dir, "main", "config.toml") });
      expect(result.status).toBe(1);
      expect(result.stdout).toMatch(/^FAIL +config +.*maxToolRounds/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the doctor's single checks", () => {
  const model = { ...getModels("anthropic")[0]!, baseUrl: "" };

  const check = (overrides: Partial<Parameters<typeof providerCheck>[0]>) =>
    providerCheck({
      model: { ...model, baseUrl: fake.url },
      getApiKey: async () => "sk-ant-api03-test",
      subscription: false,
      notConfigured: undefined,
      configPath: "/x/config.toml",
      ownServer: true,
      probe: false,
      ...overrides,
    });

  it("says a refused key is refused, and where to change it", async () => {
    const refused = await check({ getApiKey: async () => "sk-ant-api03-invalid" });
    expect(refused).toMatchObject({ name: "provider", state: "fail" });
    expect(refused.detail).toContain("the provider refused the key (401)");
    expect(refused.fix).toBe("Check apiKey in /x/config.toml: the provider does not accept it.");
  });

  it("says an unreachable provider does not answer, naming the network unless baseUrl is the owner's", async () => {
    const provider = await check({ model: { ...model, baseUrl: "http://127.0.0.1:9" }, ownServer: false });
    expect(provider).toMatchObject({ state: "fail", reason: "no-answer" });
    expect(provider.fix).toBe("Check this machine's network connection: 127.0.0.1:9 did not answer.");
    expect(provider.fix).not.toContain("baseUrl");
    const own = await check({ model: { ...model, baseUrl: "http://127.0.0.1:9" } });
    expect(own.fix).toBe(
      "Check that the server at http://127.0.0.1:9 is running, and its address (baseUrl in /x/config.toml).",
    );
  });

  it("knows a model by its id or alias, and warns of one the provider does not list, with the closest", async () => {
    const alias = await check({ model: { ...model, id: "claude-sonnet-4-5", baseUrl: fake.url } });
    expect(alias).toMatchObject({
      state: "ok",
      detail: "anthropic/claude-sonnet-4-5: reachable, the key is accepted",
    });
    const typo = await check({ model: { ...model, id: "claude-sonet-4-5", baseUrl: fake.url } });
    expect(typo).toMatchObject({ state: "warn", reason: "unknown-model" });
    expect(typo.detail).toContain(
      'the provider lists no model "claude-sonet-4-5" (did you mean "claude-sonnet-4-5-20250929"',
    );
    expect(typo.suggestions?.[0]).toBe("claude-sonnet-4-5-20250929");
    expect(typo.fix).toContain('e.g. "claude-sonnet-4-5-20250929"');
  });

  it("checks a model of an API it cannot ask against the built-in list", async () => {
    const gemini = getModels("google").find((m) => m.id === "gemini-2.5-flash")!;
    const typo = await check({ model: { ...gemini, id: "gemini-2.5-flsh" }, ownServer: false });
    expect(typo).toMatchObject({ state: "warn", reason: "unknown-model" });
    expect(typo.detail).toContain(
      '"gemini-2.5-flsh" is not a model google is known to have (did you mean "gemini-2.5-flash"',
    );
    const known = await check({ model: gemini, ownServer: false });
    expect(known).toMatchObject({
      state: "ok",
      detail: "google/gemini-2.5-flash: a key is set (google-generative-ai is not asked)",
    });
  });

  it("says no key was needed where none was given", async () => {
    const keyless = await check({ getApiKey: async () => NO_KEY });
    expect(keyless.detail).toBe(`anthropic/${model.id}: reachable, no key needed`);
  });

  it("asks a server without a model list once with a tiny request, and calls 404 everywhere a wrong address", async () => {
    const unlisted = await startFakeAnthropic({ modelList: false });
    try {
      // Without a tiny request allowed, a warning that says what the 404 may mean.
      const unasked = await check({ model: { ...model, baseUrl: unlisted.url } });
      expect(unasked).toMatchObject({ state: "warn", reason: "wrong-address" });
      expect(unasked.detail).toContain("the server lists no models, or the address is wrong");
      expect(unasked.fix).not.toContain("turns retry by themselves");
      expect(unlisted.requests).toHaveLength(0);

      const remembered = new Map();
      unlisted.enqueue(textTurn("H"));
      const probed = await check({ model: { ...model, baseUrl: unlisted.url }, probe: { remembered } });
      expect(probed).toMatchObject({ state: "ok" });
      expect(probed.detail).toContain("it answered a one-token request");
      expect(unlisted.requests).toHaveLength(1);
      expect(unlisted.requests[0]?.body).toMatchObject({ model: model.id, max_tokens: 1 });
      // Asked again (Home, every few minutes): not sent again.
      expect(await check({ model: { ...model, baseUrl: unlisted.url }, probe: { remembered } })).toEqual(
        probed,
      );
      expect(unlisted.requests).toHaveLength(1);

      const wrong = await check({ model: { ...model, baseUrl: `${unlisted.url}/wrong` }, probe: {} });
      expect(wrong).toMatchObject({ state: "fail", reason: "wrong-address" });
      expect(wrong.detail).toContain("the address is wrong");
      expect(wrong.fix).toContain("without /v1");
    } finally {
      await unlisted.close();
    }
  });

  it("reads the newest backup's age against the interval", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-backups-"));
    try {
      const now = new Date("2026-11-26T12:00:00Z");
      expect(await backupCheck(dir, 86_400, now)).toMatchObject({ state: "warn" });
      expect(await backupCheck(dir, 0, now)).toMatchObject({ state: "warn" });
      writeFileSync(join(dir, "stavrobot-2026-11-20T03-00-00Z.pglite.tar.gz"), "");
      expect(await backupCheck(dir, 86_400, now)).toMatchObject({
        state: "warn",
        detail: "the newest, stavrobot-2026-11-20T03-00-00Z.pglite.tar.gz, is 6 days old",
      });
      writeFileSync(join(dir, "stavrobot-2026-11-26T03-00-00Z.sql.gz"), "");
      writeFileSync(join(dir, "unrelated.txt"), "");
      expect(await backupCheck(dir, 86_400, now)).toEqual({
        name: "backups",
        state: "ok",
        detail: "the newest, stavrobot-2026-11-26T03-00-00Z.sql.gz, is 9 h old",
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("fails Signal whose bridge answers while its signal-cli is down", async () => {
    const bridge = {
      name: "signal-bridge",
      ok: true,
      body: { status: "ok", signalCli: "down", account: "+1" },
    };
    const context = {} as Parameters<typeof signalChannel.status>[0];
    const status = await signalChannel.status(context, Promise.resolve([bridge]));
    expect(status).toEqual({ configured: true, bridgeOk: true, signalCli: "down" });
    expect(signalChannel.check(status)).toMatchObject({
      state: "fail",
      detail: "signal-cli is down: nothing is sent or received",
    });
    const running = await signalChannel.status(
      context,
      Promise.resolve([{ ...bridge, body: { ...bridge.body, signalCli: "running" } }]),
    );
    expect(signalChannel.check(running)).toMatchObject({ state: "ok" });
    // Not installed: the bridge's reason, and what to install or set.
    const problem = 'signal-cli is not installed: "signal-cli" was not found (spawn signal-cli ENOENT).';
    const missing = await signalChannel.status(
      context,
      Promise.resolve([{ ...bridge, body: { ...bridge.body, signalCli: "missing", problem } }]),
    );
    expect(missing).toEqual({ configured: true, bridgeOk: true, signalCli: "missing", problem });
    expect(signalChannel.check(missing)).toMatchObject({
      state: "fail",
      detail: `signal-cli is missing: nothing is sent or received (${problem})`,
      fix: expect.stringContaining("Install signal-cli (signal-bridge/README.md) or set SIGNAL_CLI_PATH"),
    });
  });
});
