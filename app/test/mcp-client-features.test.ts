import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
// The real plugin-runner (its buildServer on port 0) with our features MCP server over stdio.
import {
  SECRET,
  makeTempRoot,
  startPluginHost,
  uniqueName,
  writePlugin,
  type TestPluginHost,
} from "../../plugin-runner/test/helpers.js";
import { bundleFixtureServer } from "../../plugin-runner/test/mcp/fixtures.js";
import { RED_PIXEL_PNG } from "../../plugin-runner/test/mcp/fixture-server.js";
import { chat, configFor, createTestEnv, handOver, type TestEnv } from "./helpers/app.js";

/**
 * An MCP server's resources and prompts through the app. The owner's `/prompt <server> <name>
 * key=value …`: the server's prompt becomes the owner's message the model answers; a mistake is
 * answered at once and the model is not asked; from anyone but the owner it is an ordinary
 * message. The model's `run_plugin_tool` of `resources/read` only reads: with `[trust] plugins =
 * "ask"` it runs after outside text, where a server's own tool waits for the owner.
 */
const server = uniqueName("mcp-prompts");
/** A plugin of our own format: no prompts. */
const ordinary = uniqueName("no-prompts");

let fake: FakeLlmServer;
let pluginHost: TestPluginHost;
let env: TestEnv;
let app: RunningApp;
let root: string;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  root = makeTempRoot("mcp-prompt-command");
  mkdirSync(join(root, "server"), { mode: 0o755 });
  const script = await bundleFixtureServer(join(root, "server"), "features");
  const file = join(root, "mcp-servers.json");
  writeFileSync(file, JSON.stringify({ [server]: { command: "node", args: [script], timeoutSeconds: 10 } }));
  pluginHost = await startPluginHost({ root: join(root, "host"), mcpServersFile: file });
  await vi.waitFor(
    async () => {
      const detail = await pluginHost.request("GET", `/bundles/${server}`);
      expect((detail.body as { server: { state: string } }).server.state).toBe("running");
    },
    { timeout: 30_000 },
  );
  writePlugin(pluginHost.pluginsDir, ordinary, [{ name: "noop", script: "#!/bin/sh\necho ok\n" }]);
  env = await createTestEnv(configFor(fake, "anthropic", '[trust]\nplugins = "ask"\n'));
  app = await startApp({
    env: { ...env.env, PLUGIN_RUNNER_URL: pluginHost.url, STAVROBOT_INTERNAL_SECRET: SECRET },
    logger: silentLogger,
  });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await pluginHost?.close();
  for (const name of [server, ordinary]) await pluginHost?.host.isolation.removeUser(name);
  await fake?.close();
  await env?.cleanup();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** The text of the last user message the model was sent. */
function lastUserText(index: number): string {
  const messages = (fake.requests[index]?.body as { messages: { role: string; content: unknown }[] })
    .messages;
  const last = messages.filter((message) => message.role === "user").at(-1);
  return JSON.stringify(last?.content);
}

// First: the conversation holds no outside text yet.
describe("the model and a server's resources", () => {
  it("reads a resource after outside text, where the server's own tool waits for the owner", async () => {
    const calls = fake.requests.length;
    const run = (tool: string, parameters?: Record<string, unknown>) =>
      toolTurn("run_plugin_tool", {
        plugin: server,
        tool,
        ...(parameters ? { parameters: JSON.stringify(parameters) } : {}),
      });
    fake.enqueue(
      run("first-page"),
      run("resources/read", { uri: "memo://note" }),
      run("second-page"),
      textTurn("Your note says to buy bread."),
    );
    const answer = await chat(app, "what does my note say?");
    expect(answer.body.response).toMatch(/Your note says to buy bread\.$/);
    expect(fake.requests[calls + 1]!.lastUserText).toContain("first-page ran");
    expect(fake.requests[calls + 2]!.lastUserText).toContain("Buy bread and call Ada.");
    const stopped = fake.requests[calls + 3]!.lastUserText;
    expect(stopped).toContain("waits for the owner's approval");
    expect(stopped).not.toContain("second-page ran");
  });
});

describe("/prompt", () => {
  it("sends the server's prompt, its arguments filled in, as the owner's message", async () => {
    const calls = fake.requests.length;
    fake.enqueue(textTurn("Hello Ada, what a sunny day!"));
    const answer = await chat(app, `/prompt ${server} greet name=Ada mood="very sunny"`);
    expect(answer.status).toBe(200);
    expect(answer.body.response).toMatch(/Hello Ada, what a sunny day!$/);
    expect(fake.requests.length).toBe(calls + 1);
    const sent = lastUserText(calls);
    expect(sent).toContain("Write a very sunny greeting for Ada.");
    expect(sent).not.toContain("/prompt");
    // The server wrote those words: the stored message says so, and the turn holds outside text.
    const labelled = await app.db.query<{ origin: string }>(
      "SELECT content->'provenance'->>'from' AS origin FROM messages WHERE content::text LIKE '%very sunny greeting%' AND role = 'user'",
    );
    expect(labelled.rows).toEqual([{ origin: `mcp:${server} prompt greet` }]);
  });

  it("attaches the prompt's picture, kept with the owner's files, and heads each role", async () => {
    const calls = fake.requests.length;
    fake.enqueue(textTurn("A red pixel."));
    const answer = await chat(app, `/prompt ${server} dialogue`);
    expect(answer.body.response).toMatch(/A red pixel\.$/);
    const sent = lastUserText(calls);
    expect(sent).toContain("[assistant]\\nA single red pixel.");
    expect(sent).toContain('"type":"image"');
    const kept = join(env.dir, "files", "plugin_output", server, "prompt-dialogue-1.png");
    expect(readFileSync(kept).toString("base64")).toBe(RED_PIXEL_PNG);
  });

  it("answers a mistake at once, naming what exists, and asks the model nothing", async () => {
    const calls = fake.requests.length;
    const cases: [string, string][] = [
      ["/prompt", "Usage: /prompt <server> <prompt> key=value"],
      [`/prompt ${server}`, "- greet: Greets someone. Arguments: name (required) – Who; mood – How."],
      [`/prompt ${server}`, "Usage: /prompt <server> <prompt> key=value"],
      ["/prompt no-such-server", 'No MCP server "no-such-server" is declared.'],
      [`/prompt ${ordinary} greet`, `"${ordinary}" offers no prompts.`],
      [`/prompt ${server} farewell`, `has no prompt "farewell". Its prompts: greet, dialogue.`],
      [`/prompt ${server} greet`, 'Prompt "greet" needs "name".'],
      [`/prompt ${server} greet name=Ada tone=dry`, 'Prompt "greet" has no argument "tone".'],
      [`/prompt ${server} greet Ada`, '"Ada" is not key=value.'],
      [`/prompt ${server} greet name=Ada name=Bo`, 'The argument "name" is given twice.'],
      [`/prompt ${server} greet name="Ada`, "A double quote is not closed."],
      ["/prompt no-such-server greet", 'No MCP server "no-such-server" is declared.'],
      ["/prompt Not_A_Name greet", 'No MCP server "Not_A_Name" is declared.'],
    ];
    for (const [text, expected] of cases) {
      const answer = await chat(app, text);
      expect(answer.status, text).toBe(200);
      expect(String(answer.body.response), text).toContain(expected);
    }
    expect(fake.requests.length).toBe(calls);
  });

  it("is an ordinary message from anyone but the owner", async () => {
    const calls = fake.requests.length;
    fake.enqueue(textTurn("Noted."));
    const response = await handOver(
      app,
      {
        source: "plugin:someone/tool",
        message: `/prompt ${server} greet name=Mallory`,
      },
      SECRET,
    );
    expect(response.status).toBe(202);
    await vi.waitFor(() => expect(fake.requests.length).toBe(calls + 1), { timeout: 20_000 });
    const sent = lastUserText(calls);
    expect(sent).toContain(`/prompt ${server} greet name=Mallory`);
    expect(sent).not.toContain("Write a warm greeting");
  });
});
