import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { EXIT_CONFIG } from "@stavrobot/common";
import {
  makeTempRoot,
  namespacesHere,
  startFakeAnthropic,
  textTurn,
  toolTurn,
  uniqueName,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
// Our own MCP server written with the SDK: bundled for stdio, served over Streamable HTTP.
import {
  bundleFixtureServer,
  startFixtureHttpServer,
  type FixtureHttpServer,
} from "../../plugin-runner/test/mcp/fixtures.js";
import { RED_PIXEL_PNG } from "../../plugin-runner/test/mcp/fixture-server.js";
import { chat, configFor, createTestEnv, type TestEnv, TRUST_PLUGIN_MANAGEMENT } from "./helpers/app.js";
import { raw } from "./helpers/http.js";
import { NPM_START, NPM_START_ENV, freePort, repoRoot, runToExit } from "./helpers/process.js";
import { progressOf, startProduct, stopAfterServersGo, type Product } from "./helpers/product.js";

/**
 * MCP servers the owner declares in config.toml, used by the model through the agent (the LLM is a
 * fake Anthropic server), with the product under `npm start` (the bundles): our own SDK-built
 * server over stdio in the sandbox and over Streamable HTTP, for what the published servers
 * (published-mcp-servers.test.ts) do not show: every kind of result, a tool list that changes, a
 * crash, timeouts, a broken or disabled server, no network, secrets that never leave; and the
 * declarations changed while it runs (`npm run mcp:import`, an edit that cannot be used), and
 * config errors that stop its start.
 */
const ENV_SECRET = "e2e-env-secret-4d1c88";
const HEADER_SECRET = "e2e-header-secret-9b07aa";
const stdio = uniqueName("mcp-e2e");
const quick = uniqueName("mcp-e2e-quick");
const offline = uniqueName("mcp-e2e-off");
const remote = uniqueName("mcp-e2e-http");
const disabled = uniqueName("mcp-e2e-dis");
const broken = uniqueName("mcp-e2e-broken");
// Imported from a `.mcp.json` while the product runs, named with an underscore.
const importedDeclared = uniqueName("imported").replace("-", "_");
const imported = importedDeclared.replace("_", "-");

let fake: FakeLlmServer;
let testEnv: TestEnv;
let app: Product;
let http: FixtureHttpServer;
let root: string;
let script: string;
let listener: Server;
let port: number;

function toml(value: string): string {
  return JSON.stringify(value);
}

const servers = () =>
  `[mcpServers.${stdio}]\ncommand = "node"\nargs = [${toml(script)}]\ntimeoutSeconds = 10\n` +
  `[mcpServers.${stdio}.env]\nFIXTURE_TOKEN = ${toml(ENV_SECRET)}\n` +
  `[mcpServers.${quick}]\ncommand = "node"\nargs = [${toml(script)}]\ntimeoutSeconds = 1\n` +
  `[mcpServers.${offline}]\ncommand = "node"\nargs = [${toml(script)}]\nnetwork = false\n` +
  `[mcpServers.${broken}]\ncommand = "node"\nargs = ["-e", "process.exit(9)"]\n` +
  `[mcpServers.${disabled}]\ncommand = "node"\nargs = [${toml(script)}]\nenabled = false\n` +
  `[mcpServers.${remote}]\ntype = "http"\nurl = ${toml(http.url)}\ndescription = "Remote fixture tools."\n` +
  `[mcpServers.${remote}.headers]\nAuthorization = ${toml(`Bearer ${HEADER_SECRET}`)}\n`;

beforeAll(async () => {
  root = makeTempRoot("mcp-e2e");
  mkdirSync(join(root, "server"), { mode: 0o755 });
  script = await bundleFixtureServer(join(root, "server"));
  http = await startFixtureHttpServer(HEADER_SECRET);
  listener = createServer((_req, res) => res.end("reached"));
  port = await new Promise<number>((resolve) =>
    listener.listen(0, "127.0.0.1", () => resolve((listener.address() as { port: number }).port)),
  );
  fake = await startFakeAnthropic();
  testEnv = await createTestEnv(configFor(fake, "anthropic", servers() + TRUST_PLUGIN_MANAGEMENT));
  app = await startProduct(testEnv);
}, 180_000);

afterAll(async () => {
  if (app) await stopAfterServersGo(app, testEnv, configFor(fake), stdio);
  await http?.close();
  await new Promise((resolve) => listener?.close(resolve));
  await fake?.close();
  await testEnv?.cleanup();
  if (root) rmSync(root, { recursive: true, force: true });
});

const runTool = (plugin: string, tool: string, parameters: Record<string, unknown> = {}) =>
  toolTurn("run_plugin_tool", { plugin, tool, parameters: JSON.stringify(parameters) });

/** The model runs `tool`; returns the request that carried its result to the model. */
async function modelRuns(plugin: string, tool: string, parameters: Record<string, unknown> = {}) {
  fake.reset();
  fake.enqueue(runTool(plugin, tool, parameters), textTurn("done"));
  const reply = await chat(app, `run ${tool}`);
  expect(reply.body.response).toMatch(/done$/);
  return fake.requests[1]!;
}

/** The tool_result block the model was given. */
function toolResult(request: { body: { messages: { content: unknown }[] } }): Record<string, unknown> {
  const last = request.body.messages.at(-1)!.content as Record<string, unknown>[];
  return last.find((block) => block.type === "tool_result")!;
}

async function running(plugin: string, timeout = 30_000): Promise<void> {
  await vi.waitFor(
    async () => {
      const answer = await app.runner("GET", `/bundles/${plugin}`);
      expect((answer.body as { server?: { state: string } }).server?.state).toBe("running");
    },
    { timeout, interval: 200 },
  );
}

describe("MCP servers through the agent under npm start", () => {
  it("lists each server in the system prompt and shows its tools as the server names them", async () => {
    await running(stdio);
    fake.reset();
    fake.enqueue(toolTurn("manage_plugins", { action: "show", name: stdio }), textTurn("seen"));
    await chat(app, "what can the fixture do?");
    const system = JSON.stringify(fake.requests[0]!.body.system);
    expect(system).toContain(stdio);
    expect(system).toContain("Remote fixture tools.");
    // Declared but not enabled: not started, and the model does not see it.
    expect(system).not.toContain(disabled);
    const shown = fake.requests[1]!.lastUserText;
    expect(shown).toContain("MCP server");
    expect(shown).toContain("say.hello-world");
    expect(shown).toContain("draw-pixel");
  });

  it("the model calls a tool and reads its text; an image is an image it sees; isError is a tool error", async () => {
    expect((await modelRuns(stdio, "say.hello-world", { name: "Ann" })).lastUserText).toContain(
      "Hello, Ann!",
    );
    const request = await modelRuns(stdio, "draw-pixel");
    expect(toolResult(request).content).toEqual(
      expect.arrayContaining([
        { type: "image", source: { type: "base64", media_type: "image/png", data: RED_PIXEL_PNG } },
      ]),
    );
    expect(request.lastUserText).toContain("Here is a red pixel.");
    const refused = toolResult(await modelRuns(stdio, "refuse"));
    expect(refused.is_error).toBe(true);
    expect(JSON.stringify(refused.content)).toContain("The fixture refuses politely.");
  });

  it("progress notifications are logged, and reach the person following the turn (POST /chat as events)", async () => {
    fake.reset();
    fake.enqueue(runTool(stdio, "count-slowly"), textTurn("done"));
    const events = await progressOf(app, "count for me");
    expect(events).toEqual(
      [1, 2, 3].map((step) => ({
        plugin: stdio,
        tool: "count-slowly",
        progress: step,
        total: 3,
        message: `step ${step}`,
      })),
    );
    const logged = app
      .output()
      .split("\n")
      .filter((line) => line.includes("MCP tool progress") && line.includes(stdio));
    expect(logged).toHaveLength(3);
  });

  it("a tool list that changes reaches the model", async () => {
    expect((await modelRuns(stdio, "add-tool")).lastUserText).toContain("added late-tool");
    await vi.waitFor(
      async () => expect((await modelRuns(stdio, "late-tool")).lastUserText).toContain("late tool ran"),
      { timeout: 15_000 },
    );
  });

  it("a server that crashes mid-call: the model gets an error, the server restarts, the next call works", async () => {
    const crashed = toolResult(await modelRuns(stdio, "crash"));
    expect(crashed.is_error).toBe(true);
    expect(JSON.stringify(crashed.content)).toContain("ended while the tool ran");
    await vi.waitFor(
      async () =>
        expect((await modelRuns(stdio, "say.hello-world", { name: "Bo" })).lastUserText).toContain(
          "Hello, Bo!",
        ),
      { timeout: 20_000 },
    );
  });

  it("a hung call is cancelled at the server's timeout", async () => {
    await running(quick);
    const hung = toolResult(await modelRuns(quick, "hang"));
    expect(hung.is_error).toBe(true);
    expect(JSON.stringify(hung.content)).toContain("did not answer within 1 s and was cancelled");
    await vi.waitFor(
      async () =>
        expect((await modelRuns(quick, "say.hello-world", { name: "Cy" })).lastUserText).toContain(
          "Hello, Cy!",
        ),
      { timeout: 20_000 },
    );
  });

  it.runIf(namespacesHere())("a server with network = false is refused the network", async () => {
    await running(offline);
    const url = `http://127.0.0.1:${port}/`;
    expect((await modelRuns(stdio, "fetch-url", { url })).lastUserText).toContain("status 200: reached");
    const refused = toolResult(await modelRuns(offline, "fetch-url", { url }));
    expect(refused.is_error).toBe(true);
    expect(JSON.stringify(refused.content)).toContain("fetch failed");
  });

  it('a remote server over Streamable HTTP (type = "http"), with its headers', async () => {
    expect((await modelRuns(remote, "say.hello-world", { name: "Di" })).lastUserText).toContain("Hello, Di!");
    expect(http.authorizations).toContain(`Bearer ${HEADER_SECRET}`);
  });

  it("the owner's Plugins API shows each server's state, tools and permissions", async () => {
    const list = await raw(app.port, "GET", "/api/settings/plugins/list", {});
    expect(list.status).toBe(200);
    const plugins = list.json.plugins as { name: string; format: string; server?: { state: string } }[];
    expect(plugins.find((plugin) => plugin.name === remote)).toMatchObject({
      format: "mcp",
      server: { state: "running" },
    });
    expect(plugins.find((plugin) => plugin.name === disabled)).toMatchObject({
      server: { state: "disabled" },
    });
    const detail = await raw(app.port, "GET", `/api/settings/plugins/${stdio}/detail`, {});
    expect(JSON.stringify(detail.json)).toContain("say.hello-world");
    expect(JSON.stringify(list.json) + JSON.stringify(detail.json)).not.toMatch(
      new RegExp(`${ENV_SECRET}|${HEADER_SECRET}`),
    );
  });

  it("the model cannot remove, update or configure a server: config.toml is the owner's", async () => {
    for (const turn of [
      toolTurn("manage_plugins", { action: "remove", name: stdio }),
      toolTurn("manage_plugins", { action: "update", name: stdio }),
      toolTurn("manage_plugins", { action: "configure", name: stdio, config: '{"FIXTURE_TOKEN": "x"}' }),
    ]) {
      fake.reset();
      fake.enqueue(turn, textTurn("done"));
      await chat(app, "change the fixture server");
      const result = toolResult(fake.requests[1]!);
      expect(result.is_error).toBe(true);
      expect(JSON.stringify(result.content)).toContain("declared in config.toml");
    }
    expect((await modelRuns(stdio, "say.hello-world", { name: "Ed" })).lastUserText).toContain("Hello, Ed!");
  });

  it("the status page names a server that keeps failing, and the doctor says where to look", async () => {
    await vi.waitFor(
      async () => {
        const status = await raw(app.port, "GET", "/api/status", {});
        const runner = (status.json.services as { name: string; detail?: string }[]).find(
          (service) => service.name === "plugin-runner",
        );
        expect(runner?.detail).toContain(`MCP servers failing: ${broken}`);
      },
      { timeout: 20_000 },
    );
    const checked = await raw(app.port, "GET", "/api/checks", {});
    const mcp = (checked.json.checks as { name: string; state: string; detail: string; fix?: string }[]).find(
      (check) => check.name === "mcp servers",
    );
    expect(mcp).toMatchObject({ state: "fail", detail: `failing: ${broken}` });
    expect(mcp?.fix).toContain("Plugins page");
  });

  it("npm run mcp:import adds a server from a .mcp.json; the model uses it without a restart", async () => {
    const file = join(root, ".mcp.json");
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: {
          [importedDeclared]: {
            type: "stdio",
            command: "node",
            args: [script],
            env: { FIXTURE_TOKEN: "${IMPORT_TOKEN:-imported-token}" },
          },
          [stdio]: { command: "node", args: [script] },
        },
      }),
    );
    // As a person runs it: through npm, on the same data directory.
    const done = await runNpm(["run", "--silent", "mcp:import", "--", file], testEnv.env);
    expect(done.output).toContain(`[mcpServers.${importedDeclared}]`);
    expect(done.output).toContain(`Refused ${stdio}: config.toml declares "${stdio}" already`);
    expect(done.code).toBe(1);
    expect(readFileSync(testEnv.env.CONFIG_PATH as string, "utf8")).toContain(
      `[mcpServers.${importedDeclared}]`,
    );
    await vi.waitFor(
      async () =>
        expect((await modelRuns(imported, "say.hello-world", { name: "Fi" })).lastUserText).toContain(
          "Hello, Fi!",
        ),
      { timeout: 30_000, interval: 500 },
    );
    // The others kept running as they were.
    expect((await modelRuns(stdio, "say.hello-world", { name: "Gu" })).lastUserText).toContain("Hello, Gu!");
  });

  it("an edit that cannot be used keeps the servers running and says why (doctor, Plugins page)", async () => {
    const path = testEnv.env.CONFIG_PATH as string;
    const good = readFileSync(path, "utf8");
    writeFileSync(path, `${good}\n[mcpServers.${stdio}-more]\ncommand = "\${NOT_SET_ANYWHERE}"\n`);
    await vi.waitFor(
      async () => {
        const checked = await raw(app.port, "GET", "/api/checks", {});
        const problem = (checked.json.checks as { name: string; detail: string }[]).find(
          (check) => check.name === "mcp servers config",
        );
        expect(problem?.detail).toContain("NOT_SET_ANYWHERE is not set in the app's environment");
      },
      { timeout: 10_000 },
    );
    const list = await raw(app.port, "GET", "/api/settings/plugins/list", {});
    expect(list.json.mcpConfigProblem).toContain(`mcpServers.${stdio}-more.command`);
    expect((await modelRuns(stdio, "say.hello-world", { name: "Ha" })).lastUserText).toContain("Hello, Ha!");
    writeFileSync(path, good);
    await vi.waitFor(
      async () => {
        const checked = await raw(app.port, "GET", "/api/checks", {});
        expect((checked.json.checks as { name: string }[]).map((check) => check.name)).not.toContain(
          "mcp servers config",
        );
      },
      { timeout: 10_000 },
    );
  });

  it("secrets in env and headers never reached the model or a log", () => {
    const everything = JSON.stringify(fake.requests.map((request) => request.body)) + app.output();
    expect(everything).not.toContain(ENV_SECRET);
    expect(everything).not.toContain(HEADER_SECRET);
    // The crash printed the token to stderr: it was logged hidden.
    expect(app.output()).toContain("token [secret] rejected");
  });
});

describe("config errors stop npm start, naming what to fix", () => {
  async function refusedStart(servers: string, env: NodeJS.ProcessEnv = {}) {
    const bad = await createTestEnv(configFor(fake, "anthropic", servers));
    try {
      // Ports of its own: a start refused for its config must not be refused for a port first.
      const ports = {
        PLUGIN_RUNNER_PORT: String(await freePort()),
        PYTHON_RUNNER_PORT: String(await freePort()),
        CODER_PORT: String(await freePort()),
        SIGNAL_BRIDGE_PORT: String(await freePort()),
      };
      return await runToExit(
        NPM_START,
        { ...bad.env, ...NPM_START_ENV, ...ports, ...env },
        { javascript: true, timeoutMs: 120_000 },
      );
    } finally {
      await bad.cleanup();
    }
  }

  it("an unknown key of a server", async () => {
    const { code, output } = await refusedStart(`[mcpServers.x]\ncommand = "node"\nargss = ["a"]\n`);
    expect(code).toBe(EXIT_CONFIG);
    expect(output).toContain('"mcpServers.x.argss" is not a setting');
    expect(output).toContain('did you mean "args"');
  });

  it("a ${VAR} the environment lacks, naming server, key and variable", async () => {
    const { code, output } = await refusedStart(
      `[mcpServers.github]\ncommand = "npx"\n[mcpServers.github.env]\nGITHUB_TOKEN = "\${GITHUB_TOKEN}"\n`,
    );
    expect(code).toBe(EXIT_CONFIG);
    expect(output).toContain(
      'key "mcpServers.github.env.GITHUB_TOKEN" uses ${GITHUB_TOKEN}, but GITHUB_TOKEN is not set in the app\'s environment',
    );
  });
});

/** npm itself in this checkout, as a person runs it: its exit code and everything it wrote. */
function runNpm(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile("npm", args, { cwd: repoRoot, env, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr }),
    );
  });
}
