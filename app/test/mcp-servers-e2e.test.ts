import { rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ConfigError, basicAuthHeader, type Logger } from "@stavrobot/common";
import {
  namespacesHere,
  startFakeAnthropic,
  textTurn,
  toolTurn,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import type { RunningApp } from "../src/app.js";
import { startApp } from "../src/app.js";
// The real plugin-runner (its routes on port 0) and our own MCP server written with the SDK.
import {
  SECRET,
  makeTempRoot,
  startPluginHost,
  uniqueName,
  type TestPluginHost,
} from "../../plugin-runner/test/helpers.js";
import {
  bundleFixtureServer,
  startFixtureHttpServer,
  type FixtureHttpServer,
} from "../../plugin-runner/test/mcp/fixtures.js";
import { RED_PIXEL_PNG } from "../../plugin-runner/test/mcp/fixture-server.js";
import { PASSWORD, chat, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { raw } from "./helpers/http.js";
import { freePort } from "./helpers/process.js";

/**
 * MCP servers the owner declares in config.toml, used by the model through the agent (the LLM is a
 * fake Anthropic server): the app hands the declarations to the real plugin-runner, which runs our
 * own SDK-built server over stdio in the sandbox and reaches it over Streamable HTTP.
 */
const ENV_SECRET = "e2e-env-secret-4d1c88";
const HEADER_SECRET = "e2e-header-secret-9b07aa";
const stdio = uniqueName("mcp-e2e");
const quick = uniqueName("mcp-e2e-quick");
const offline = uniqueName("mcp-e2e-off");
const remote = uniqueName("mcp-e2e-http");
const disabled = uniqueName("mcp-e2e-dis");
const broken = uniqueName("mcp-e2e-broken");

const lines: string[] = [];
function collecting(scope: string): Logger {
  const log =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void =>
      void lines.push(`${level} [${scope}] ${message} ${fields ? JSON.stringify(fields) : ""}`);
  return {
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    child: (child) => collecting(`${scope}:${child}`),
  };
}

let fake: FakeLlmServer;
let testEnv: TestEnv;
let app: RunningApp;
let pluginHost: TestPluginHost;
let http: FixtureHttpServer;
let root: string;
let listener: Server;
let port: number;

function toml(value: string): string {
  return JSON.stringify(value);
}

beforeAll(async () => {
  root = makeTempRoot("mcp-e2e");
  const script = await bundleFixtureServer(root);
  http = await startFixtureHttpServer(HEADER_SECRET);
  listener = createServer((_req, res) => res.end("reached"));
  port = await new Promise<number>((resolve) =>
    listener.listen(0, "127.0.0.1", () => resolve((listener.address() as { port: number }).port)),
  );
  const servers =
    `[mcpServers.${stdio}]\ncommand = "node"\nargs = [${toml(script)}]\ntimeoutSeconds = 10\n` +
    `[mcpServers.${stdio}.env]\nFIXTURE_TOKEN = ${toml(ENV_SECRET)}\n` +
    `[mcpServers.${quick}]\ncommand = "node"\nargs = [${toml(script)}]\ntimeoutSeconds = 1\n` +
    `[mcpServers.${offline}]\ncommand = "node"\nargs = [${toml(script)}]\nnetwork = false\n` +
    `[mcpServers.${broken}]\ncommand = "node"\nargs = ["-e", "process.exit(9)"]\n` +
    `[mcpServers.${disabled}]\ncommand = "node"\nargs = [${toml(script)}]\nenabled = false\n` +
    `[mcpServers.${remote}]\nurl = ${toml(http.url)}\ndescription = "Remote fixture tools."\n` +
    `[mcpServers.${remote}.headers]\nAuthorization = ${toml(`Bearer ${HEADER_SECRET}`)}\n`;
  fake = await startFakeAnthropic();
  testEnv = await createTestEnv(configFor(fake, "anthropic", servers));
  const internalPort = await freePort();
  pluginHost = await startPluginHost({
    appUrl: `http://127.0.0.1:${internalPort}`,
    // Where the app writes them: beside its internal secret, beside config.toml here.
    mcpServersFile: join(dirname(testEnv.env.CONFIG_PATH as string), "mcp-servers.json"),
    logger: collecting("plugin-runner"),
  });
  app = await startApp({
    env: {
      ...testEnv.env,
      INTERNAL_PORT: String(internalPort),
      PLUGIN_RUNNER_URL: pluginHost.url,
      STAVROBOT_INTERNAL_SECRET: SECRET,
    },
    logger: collecting("app"),
  });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await pluginHost?.close();
  for (const name of [stdio, quick, offline, remote, disabled, broken])
    await pluginHost?.host.isolation.removeUser(name);
  await http?.close();
  await new Promise((resolve) => listener?.close(resolve));
  await fake?.close();
  await testEnv?.cleanup();
  if (root) rmSync(root, { recursive: true, force: true });
  if (pluginHost) rmSync(pluginHost.root, { recursive: true, force: true });
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

describe("MCP servers through the agent", () => {
  it("lists each server in the system prompt and shows its tools as the server names them", async () => {
    await vi.waitFor(
      async () => {
        const answer = await pluginHost.request("GET", `/bundles/${stdio}`);
        expect((answer.body as { server?: { state: string } }).server?.state).toBe("running");
      },
      { timeout: 30_000 },
    );
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

  it("the model calls a tool and reads its text", async () => {
    expect((await modelRuns(stdio, "say.hello-world", { name: "Ann" })).lastUserText).toContain(
      "Hello, Ann!",
    );
  });

  it("an image result is an image the model sees", async () => {
    const request = await modelRuns(stdio, "draw-pixel");
    const result = toolResult(request);
    expect(JSON.stringify(result.content)).toContain(RED_PIXEL_PNG);
    expect(result.content).toEqual(
      expect.arrayContaining([
        { type: "image", source: { type: "base64", media_type: "image/png", data: RED_PIXEL_PNG } },
      ]),
    );
    expect(request.lastUserText).toContain("Here is a red pixel.");
  });

  it("isError is a tool error", async () => {
    const result = toolResult(await modelRuns(stdio, "refuse"));
    expect(result.is_error).toBe(true);
    expect(JSON.stringify(result.content)).toContain("The fixture refuses politely.");
  });

  it("progress notifications are logged while the tool runs", async () => {
    expect((await modelRuns(stdio, "count-slowly")).lastUserText).toContain("counted to 3");
    expect(lines.filter((line) => line.includes("MCP tool progress") && line.includes(stdio))).toHaveLength(
      3,
    );
  });

  it("progress notifications reach the person following the turn (POST /chat as events)", async () => {
    fake.reset();
    fake.enqueue(runTool(stdio, "count-slowly"), textTurn("done"));
    const response = await fetch(`http://127.0.0.1:${app.port}/chat`, {
      method: "POST",
      headers: {
        Authorization: basicAuthHeader(PASSWORD),
        "Content-Type": "application/json",
        Accept: "text/event-stream",
      },
      body: JSON.stringify({ message: "count for me", source: "cli" }),
    });
    const events = (await response.text())
      .split("\n\n")
      .filter((block) => block.startsWith("event: progress"))
      .map((block) => JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "null") as Record<string, unknown>);
    expect(events).toEqual(
      [1, 2, 3].map((step) => ({
        plugin: stdio,
        tool: "count-slowly",
        progress: step,
        total: 3,
        message: `step ${step}`,
      })),
    );
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
    const url = `http://127.0.0.1:${port}/`;
    expect((await modelRuns(stdio, "fetch-url", { url })).lastUserText).toContain("status 200: reached");
    const refused = toolResult(await modelRuns(offline, "fetch-url", { url }));
    expect(refused.is_error).toBe(true);
    expect(JSON.stringify(refused.content)).toContain("fetch failed");
  });

  it("a remote server over Streamable HTTP, with its headers", async () => {
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

  it("the status page names a server that keeps failing", async () => {
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
    // The doctor fails it too, saying where to look.
    const checked = await raw(app.port, "GET", "/api/checks", {});
    const mcp = (checked.json.checks as { name: string; state: string; detail: string; fix?: string }[]).find(
      (check) => check.name === "mcp servers",
    );
    expect(mcp).toMatchObject({ state: "fail", detail: `failing: ${broken}` });
    expect(mcp?.fix).toContain("Plugins page");
  });

  it("secrets in env and headers never reached the model or a log", () => {
    const everything = JSON.stringify(fake.requests.map((request) => request.body)) + lines.join("\n");
    expect(everything).not.toContain(ENV_SECRET);
    expect(everything).not.toContain(HEADER_SECRET);
    // The crash printed the token to stderr: it was logged hidden.
    expect(lines.some((line) => line.includes("rejected") && line.includes("[secret]"))).toBe(true);
  });

  it("a config with an unknown key in a server is refused, naming it", async () => {
    const bad = await createTestEnv(
      configFor(fake, "anthropic", `[mcpServers.x]\ncommand = "node"\nargss = ["a"]\n`),
    );
    try {
      const refused = await startApp({ env: bad.env, logger: collecting("bad-app") }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as Error).message).toContain('"mcpServers.x.argss" is not a setting');
      expect((refused as Error).message).toContain('did you mean "args"');
    } finally {
      await bad.cleanup();
    }
  });
});
