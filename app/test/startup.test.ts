import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { afterEach, describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { createTestDatabase, type TestDatabase } from "./helpers/db.js";
import { PASSWORD, configFor, createTestEnv, post, type TestEnv } from "./helpers/app.js";
import { NPM_START, repoRoot, startAppProcess, type AppProcess } from "./helpers/process.js";

let dir: string;
let database: TestDatabase | undefined;
let running: AppProcess | undefined;
let fake: FakeLlmServer | undefined;
let testEnv: TestEnv | undefined;

afterEach(async () => {
  await running?.stop();
  running = undefined;
  await database?.drop();
  database = undefined;
  await testEnv?.cleanup();
  testEnv = undefined;
  await fake?.close();
  fake = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Whether something answers `GET /health` on that loopback port with 200. */
const healthy = (port: number): Promise<boolean> =>
  fetch(`http://127.0.0.1:${port}/health`).then(
    (response) => response.ok,
    () => false,
  );

/** Runs the launcher to its exit; its exit code and everything it wrote to stderr. */
async function launchToExit(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawn(
    process.execPath,
    ["--conditions=source", "--import", "tsx", "app/src/boot/start-local.ts"],
    {
      cwd: repoRoot,
      env,
    },
  );
  let output = "";
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, output };
}

function baseEnv(): NodeJS.ProcessEnv {
  dir = mkdtempSync(join(tmpdir(), "stavrobot-start-"));
  return { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dir, TZ: "UTC" };
}

describe("npm start", () => {
  it("on first run writes a config with a generated password, stays up, and explains the missing key", async () => {
    database = await createTestDatabase();
    const env = { ...baseEnv(), ...database.env };
    running = await startAppProcess(env);
    const configPath = join(dir, "main", "config.toml");
    const config = readFileSync(configPath, "utf8");
    const password = /^password = "([^"]+)"$/m.exec(config)?.[1];
    expect(password).toBeDefined();
    expect(password).not.toBe("CHANGE-ME");
    expect(statSync(configPath).mode & 0o777).toBe(0o600);
    // The internal secret was generated beside it, also private.
    expect(statSync(join(dir, "main", "internal-secret")).mode & 0o777).toBe(0o600);
    expect(running.output()).toContain("Set your LLM provider on the Settings page");
    // Without a terminal nothing is asked: the start goes on by itself.
    expect(running.output()).not.toContain("Which one?");
    // The plugin-runner always runs; the python-runner from its first use; the coder only when
    // [coder] is set.
    const { runnerPort, pythonRunnerPort, coderPort } = running;
    await vi.waitUntil(() => healthy(runnerPort), { timeout: 30_000, interval: 100 });
    expect(await healthy(pythonRunnerPort)).toBe(false);
    expect(await healthy(coderPort)).toBe(false);

    const reply = await post(running.port, "/chat", { message: "hi" }, basicAuthHeader(password!));
    expect(reply.status).toBe(503);
    expect(String(reply.body.error)).toContain("no LLM provider key");
    expect(String(reply.body.error)).toContain(configPath);
    // Nothing was queued for a message that could not be answered.
    expect((await post(running.port, "/chat", { message: "hi" }, basicAuthHeader("wrong"))).status).toBe(401);
    expect(await running.stop("SIGTERM")).toBe(0);
  }, 90_000);

  it("stops with a message naming the key when the config is invalid", async () => {
    const env = baseEnv();
    mkdirSync(join(dir, "main"), { recursive: true });
    writeFileSync(
      join(dir, "main", "config.toml"),
      'model = "claude-sonnet-4-5"\npassword = "long-enough-pw"\ncontextTokensK = "lots"\n',
    );
    const { code, output } = await launchToExit({ ...env, PORT: "0", INTERNAL_PORT: "0" });
    expect(code).toBe(78);
    expect(output).toContain('key "contextTokensK"');
  }, 30_000);

  it("stops with exit code 78 naming the variable when the environment is wrong", async () => {
    const { code, output } = await launchToExit({ ...baseEnv(), PORT: "eighty", INTERNAL_PORT: "0" });
    expect(code).toBe(78);
    expect(output).toContain("Invalid app environment: PORT:");
    expect(output).toContain('got "eighty"');
  }, 30_000);

  // The app is told where each sibling listens, so "any free port" (0) is refused too.
  it.each([
    ["PLUGIN_RUNNER_PORT", "eighty"],
    ["PYTHON_RUNNER_PORT", "0"],
    ["CODER_PORT", "70000"],
    ["SIGNAL_BRIDGE_PORT", "3.5"],
  ])(
    "stops with exit code 78 naming %s when it is %j",
    async (variable, value) => {
      const { code, output } = await launchToExit({ ...baseEnv(), INTERNAL_PORT: "0", [variable]: value });
      expect(code).toBe(78);
      expect(output).toContain(`Invalid launcher environment: ${variable}:`);
      expect(output).toContain(`got ${JSON.stringify(value)}`);
    },
    30_000,
  );

  it("runs every service from its bundle: a turn with a tool, the web UI's files, the siblings", async () => {
    fake = await startFakeAnthropic();
    fake.setResponder((request) =>
      request.lastUserText.includes("use a tool")
        ? toolTurn("execute_sql", { query: "SELECT 41 + 1 AS answer" })
        : request.lastUserText.includes("use python")
          ? toolTurn("run_python", { code: "print(6 * 7 * 1000 + 1)" })
          : textTurn("the answer is 42"),
    );
    testEnv = await createTestEnv(configFor(fake));
    running = await startAppProcess(testEnv.env, 120_000, NPM_START);
    expect(existsSync(join(repoRoot, "app", "bundle", "start-local.js"))).toBe(true);
    const { runnerPort, pythonRunnerPort } = running;
    await vi.waitUntil(() => healthy(runnerPort), { timeout: 30_000, interval: 100 });
    // The model's client, the tool and the database, all bundled.
    const reply = await post(running.port, "/chat", { message: "use a tool" });
    expect(reply.body.response).toBe("the answer is 42");
    // The tool ran against the database and its result went back to the model.
    expect(JSON.stringify(fake.requests.at(-1)?.body)).toContain(
      '"tool_result","tool_use_id":"toolu_1","content":"rows[1]{answer}:\\n  42"',
    );
    // The python-runner is started by the first run_python, which gets its answer.
    expect(await healthy(pythonRunnerPort)).toBe(false);
    const python = await post(running.port, "/chat", { message: "use python" });
    expect(python.body.response).toBe("the answer is 42");
    expect(JSON.stringify(fake.requests.at(-1)?.body.messages.at(-1))).toContain("42001");
    expect(await healthy(pythonRunnerPort)).toBe(true);
    // The web UI's files are found beside the bundle (app/web), as beside the sources.
    const authorization = basicAuthHeader(PASSWORD);
    for (const [path, text] of [
      ["/login", "<html"],
      ["/", "<html"],
    ]) {
      const page = await fetch(`http://127.0.0.1:${running.port}${path}`, {
        headers: { Authorization: authorization },
      });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain(text);
    }
    // The plugin list was read for the prompt once the runner answered: no warning at start.
    expect(running.output()).not.toContain("could not list plugins");
    expect(await running.stop("SIGTERM")).toBe(0);

    // Nothing changed since: the next start runs the same bundles without bundling again.
    running = await startAppProcess(testEnv.env, 60_000, NPM_START);
    expect(running.output()).not.toContain("Bundling");
    expect((await post(running.port, "/chat", { message: "again" })).body.response).toBe("the answer is 42");
  }, 180_000);

  it("runs the python-runner once asked, and the coder when [coder] is set, and stops them all on SIGTERM", async () => {
    fake = await startFakeAnthropic();
    testEnv = await createTestEnv(configFor(fake, "anthropic", '[coder]\nmodel = "sonnet"\n'));
    running = await startAppProcess(testEnv.env);
    const { pythonRunnerPort, coderPort, runnerPort } = running;
    // The status page asks every sibling for its health, which starts the python-runner.
    const status = await fetch(`http://127.0.0.1:${running.port}/api/status`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    expect(status.status).toBe(200);
    // The app can be up before its siblings are listening.
    await vi.waitFor(
      async () => {
        expect(await healthy(runnerPort)).toBe(true);
        expect(await healthy(pythonRunnerPort)).toBe(true);
        expect(await healthy(coderPort)).toBe(true);
      },
      { timeout: 30_000, interval: 100 },
    );
    // Ctrl-C or `kill -TERM -<pgid>` tells every process of the group to stop at once.
    expect(await running.stop("SIGTERM")).toBe(0);
    // The siblings stopped on their own signal: none was "restarted" while the app closed.
    expect(running.output()).not.toContain("restarting");
    for (const port of [runnerPort, pythonRunnerPort, coderPort]) expect(await healthy(port)).toBe(false);
  }, 90_000);

  it("starts no sibling the app is pointed at by URL: none runs, none writes the data directory", async () => {
    fake = await startFakeAnthropic();
    testEnv = await createTestEnv(configFor(fake));
    const elsewhere = { PLUGIN_RUNNER_URL: "http://127.0.0.1:9", PYTHON_RUNNER_URL: "http://127.0.0.1:9" };
    running = await startAppProcess({ ...testEnv.env, ...elsewhere });
    const { pythonRunnerPort, runnerPort } = running;
    // The status page asks the siblings it uses: the ones at those addresses, which are down.
    const status = await fetch(`http://127.0.0.1:${running.port}/api/status`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    const services = ((await status.json()) as { services: { name: string; ok: boolean }[] }).services;
    expect(services.filter((service) => service.ok)).toEqual([]);
    expect(await healthy(runnerPort)).toBe(false);
    expect(await healthy(pythonRunnerPort)).toBe(false);
    for (const dir of ["plugins", "plugin-data", "plugin-runner", "python-runner"])
      expect(existsSync(join(testEnv.dir, dir))).toBe(false);
    expect(await running.stop("SIGTERM")).toBe(0);
  }, 90_000);

  it("hands the owner's MCP servers to its plugin-runner at MCP_SERVERS_FILE, none left beside the secret", async () => {
    fake = await startFakeAnthropic();
    // Disabled: declared and listed, never started.
    testEnv = await createTestEnv(
      configFor(fake, "anthropic", '[mcpServers.e2e-quiet]\ncommand = "node"\nenabled = false\n'),
    );
    // What an older version wrote beside the internal secret (config.toml's directory here).
    const old = join(testEnv.dir, "main", "mcp-servers.json");
    writeFileSync(old, '{"e2e-old":{"command":"node"}}\n');
    const file = join(testEnv.dir, "mcp", "mcp-servers.json");
    running = await startAppProcess({ ...testEnv.env, MCP_SERVERS_FILE: file }, 60_000, NPM_START);
    expect(existsSync(old)).toBe(false);
    expect(Object.keys(JSON.parse(readFileSync(file, "utf8")) as object)).toEqual(["e2e-quiet"]);
    const { port } = running;
    await vi.waitFor(
      async () => {
        const list = await fetch(`http://127.0.0.1:${port}/api/settings/plugins/list`, {
          headers: { Authorization: basicAuthHeader(PASSWORD) },
        });
        expect(await list.text()).toContain("e2e-quiet");
      },
      { timeout: 30_000, interval: 200 },
    );
  }, 90_000);

  it("leaves no plugin-runner behind when it is killed with kill -9", async () => {
    database = await createTestDatabase();
    running = await startAppProcess({ ...baseEnv(), ...database.env });
    const { runnerPort } = running;
    // The app can be up before its runner child is listening.
    await vi.waitUntil(() => healthy(runnerPort), { timeout: 30_000, interval: 100 });
    running.child.kill("SIGKILL"); // only the launcher, as a crash would
    await running.exited;
    await vi.waitUntil(
      () =>
        fetch(`http://127.0.0.1:${runnerPort}/health`).then(
          () => false,
          () => true,
        ),
      { timeout: 10_000, interval: 100 },
    );
  }, 90_000);
});

describe("npm start with a model pi-ai does not list", () => {
  /** Anthropic's prices as config.toml may set them, unlike any listed Claude model's. */
  const COST = { input: 7, output: 11, cacheRead: 0.5, cacheWrite: 13 };
  const newerClaude = (fakeUrl: string, extra = "") =>
    [
      'provider = "anthropic"',
      'model = "claude-sonnet-5"',
      `baseUrl = "${fakeUrl}"`,
      'api = "anthropic-messages"',
      'apiKey = "sk-ant-api03-test"',
      `password = "${PASSWORD}"`,
      `cost = { input = ${COST.input}, output = ${COST.output}, cacheRead = ${COST.cacheRead}, cacheWrite = ${COST.cacheWrite} }`,
      extra,
    ].join("\n");

  it("starts with the closest listed model as template, sends the new id, and counts the configured cost", async () => {
    fake = await startFakeAnthropic();
    fake.setResponder(() => textTurn("hello from a newer model"));
    // A budget the first turn uses up, at the configured prices.
    testEnv = await createTestEnv(newerClaude(fake.url, "[budget]\ndaily = 0.0001\n"));
    running = await startAppProcess(testEnv.env, 120_000, NPM_START);
    expect(running.output()).toMatch(
      /WARN \[app\] pi-ai does not list model "claude-sonnet-5": using anthropic's "claude-sonnet-4-6" as its template/,
    );
    // The template's window and output limit; the configured prices.
    expect(running.output()).toContain('"contextWindow":1000000,"maxTokens":64000');
    expect(running.output()).toContain(`"costPerMillionTokens":${JSON.stringify(COST)}`);

    const reply = await post(running.port, "/chat", { message: "hi" });
    expect(reply.body.response).toBe("hello from a newer model");
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]?.body.model).toBe("claude-sonnet-5");

    // The Usage page counts the turn at the configured prices, not the template's nor zero.
    const usage = (await (
      await fetch(`http://127.0.0.1:${running.port}/api/usage`, {
        headers: { Authorization: basicAuthHeader(PASSWORD) },
      })
    ).json()) as {
      turns: {
        inputTokens: number;
        outputTokens: number;
        cacheReadTokens: number;
        cacheWriteTokens: number;
        costUsd: number;
      }[];
      budgets: { daily: { spentUsd: number } };
    };
    expect(usage.turns).toHaveLength(1);
    const turn = usage.turns[0]!;
    expect(turn.inputTokens + turn.outputTokens + turn.cacheWriteTokens).toBeGreaterThan(0);
    const priced = (prices: typeof COST) =>
      (turn.inputTokens * prices.input +
        turn.outputTokens * prices.output +
        turn.cacheReadTokens * prices.cacheRead +
        turn.cacheWriteTokens * prices.cacheWrite) /
      1_000_000;
    expect(turn.costUsd).toBeCloseTo(priced(COST), 12);
    expect(turn.costUsd).not.toBeCloseTo(
      priced({ input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 }),
      8,
    );
    expect(usage.budgets.daily.spentUsd).toBeCloseTo(priced(COST), 12);

    // So the budget stops the next turn before any model call.
    const refused = await post(running.port, "/chat", { message: "again" });
    expect(refused.body.response).toMatch(/^The daily budget of \$0\.00 is used up/);
    expect(fake.requests).toHaveLength(1);
    expect(await running.stop("SIGTERM")).toBe(0);
  }, 180_000);

  it.each([
    ["contextWindow", 'contextWindow = "200k"\n', "must be a number, e.g. contextWindow = 30"],
    ["maxTokens", "maxTokens = 1.5\n", "must be a whole number"],
    ["cost.input", 'cost = { input = "three" }\n', "must be a number"],
    ["cost.cacheWrite", "cost = { cacheWrite = -1 }\n", "0 or more"],
  ])(
    "stops with exit code 78 naming %s when it is wrong",
    async (key, line, expected) => {
      const env = baseEnv();
      mkdirSync(join(dir, "main"), { recursive: true });
      writeFileSync(
        join(dir, "main", "config.toml"),
        `model = "claude-sonnet-5"\npassword = "long-enough-pw"\n${line}`,
      );
      const { code, output } = await launchToExit({ ...env, PORT: "0", INTERNAL_PORT: "0" });
      expect(code).toBe(78);
      expect(output).toContain(`key "${key}"`);
      expect(output).toContain(expected);
    },
    30_000,
  );
});
