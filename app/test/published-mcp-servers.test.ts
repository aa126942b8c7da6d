import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { basicAuthHeader } from "@stavrobot/common";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  isRoot,
  makeTempRoot,
  namespacesHere,
  onPath,
  requires,
  startFakeAnthropic,
  textTurn,
  toolTurn,
  uniqueName,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import { PASSWORD, chat, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { progressOf, startProduct, stopAfterServersGo, type Product } from "./helpers/product.js";
import { PUBLISHED_MCP_SERVERS, installPublishedMcpServers } from "./helpers/published-mcp.js";

/**
 * The published MCP servers, installed from npm at pinned versions and declared in config.toml
 * as their READMEs show (a local install's entry, npm's `.bin` link, and `npx -y`), run by the
 * product under `npm start` (the bundles) and called through the agent with a fake LLM, in each
 * sandbox this machine has: bubblewrap's (or unshare's) namespaces, and the plain one
 * (`PLUGIN_SANDBOX=plain`). One product per sandbox, every server in it.
 */
const MODES = [
  ...(namespacesHere() ? [{ name: "namespaces", env: {} }] : []),
  { name: "plain", env: { PLUGIN_SANDBOX: "plain" } },
] as const;
const PROBE_SECRET = "probe-value-6c1e90";
/**
 * As root each server is a user of its own, written to the folders its declaration names through
 * an ACL entry: without `setfacl` (Debian's `acl`) the product gives none, and says so in its log.
 */
const canGrantWrites =
  !isRoot ||
  requires(
    "writes into the folders a declaration names: setfacl is not installed (Debian package acl)",
    onPath("setfacl"),
  );

let install: string;
let root: string;
let fake: FakeLlmServer;
beforeAll(async () => {
  install = await installPublishedMcpServers();
  root = makeTempRoot("published-mcp");
  fake = await startFakeAnthropic();
}, 360_000);

afterAll(async () => {
  await fake?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.each(MODES)("published MCP servers under npm start ($name sandbox)", (mode) => {
  const suffix = uniqueName("x").slice(2);
  const everything = `everything-${suffix}`;
  // Declared with underscores; the plugin it becomes has hyphens.
  const memoryDeclared = `memory_graph_${suffix}`;
  const memory = `memory-graph-${suffix}`;
  const files = `files-${suffix}`;
  const npx = `memory-npx-${suffix}`;
  let testEnv: TestEnv;
  let app: Product;
  let own: string;
  const at = (...parts: string[]) => join(own, ...parts);
  const entry = (server: string) =>
    join("${MCP_INSTALL}", "node_modules", "@modelcontextprotocol", server, "dist", "index.js");

  const config = () =>
    configFor(
      fake,
      "anthropic",
      // The install's entry, with ${VAR} from the app's environment, as the README shape.
      `[mcpServers.${everything}]\ncommand = "node"\nargs = [${q(entry("server-everything"))}]\n` +
        `[mcpServers.${everything}.env]\nSTAVROBOT_PROBE = "\${PROBE_VALUE}"\n` +
        // npm's .bin link as the command; a file in a folder that does not exist yet.
        `[mcpServers.${memoryDeclared}]\ncommand = ${q(join(install, "node_modules", ".bin", "mcp-server-memory"))}\n` +
        `[mcpServers.${memoryDeclared}.env]\nMEMORY_FILE_PATH = ${q(at("mcp-state", "memory.jsonl"))}\n` +
        `[mcpServers.${files}]\ncommand = "node"\nargs = [${q(entry("server-filesystem"))}, ${q(at("notes"))}]\n` +
        // As every README shows it first: fetched by npx on the first start, at a pinned version.
        `[mcpServers.${npx}]\ncommand = "npx"\n` +
        `args = ["-y", "@modelcontextprotocol/server-memory@${PUBLISHED_MCP_SERVERS["@modelcontextprotocol/server-memory"]}"]\n` +
        `startTimeoutSeconds = 300\n[mcpServers.${npx}.env]\nMEMORY_FILE_PATH = "~/memory.jsonl"\n`,
    );
  const productEnv = () => ({ ...mode.env, MCP_INSTALL: install, PROBE_VALUE: PROBE_SECRET });

  beforeAll(async () => {
    own = join(root, mode.name);
    mkdirSync(at("notes"), { recursive: true });
    mkdirSync(at("elsewhere"), { recursive: true });
    writeFileSync(at("notes", "todo.txt"), "buy milk");
    writeFileSync(at("elsewhere", "secret.txt"), "not for the server");
    testEnv = await createTestEnv(config());
    // Plugin users pass through the data directory to their own folders (the plain sandbox).
    chmodSync(testEnv.dir, 0o711);
    app = await startProduct(testEnv, { env: productEnv() });
  }, 180_000);

  afterAll(async () => {
    if (app) await stopAfterServersGo(app, testEnv, configFor(fake), files);
    await testEnv?.cleanup();
  });

  const runTool = (plugin: string, tool: string, parameters: Record<string, unknown>) =>
    toolTurn("run_plugin_tool", { plugin, tool, parameters: JSON.stringify(parameters) });

  /** The model runs `tool`; the tool result it was given. */
  async function modelRuns(plugin: string, tool: string, parameters: Record<string, unknown> = {}) {
    fake.reset();
    fake.enqueue(runTool(plugin, tool, parameters), textTurn("done"));
    const reply = await chat(app, `run ${tool}`);
    expect(reply.body.response).toMatch(/done$/);
    return fake.requests[1]!.lastUserText;
  }

  async function running(plugin: string, timeout = 60_000): Promise<void> {
    await vi.waitFor(
      async () => {
        const detail = await app.runner("GET", `/bundles/${plugin}`);
        const server = (detail.body as { server?: { state: string; lastError?: string } }).server;
        expect(server?.state, server?.lastError).toBe("running");
      },
      { timeout, interval: 250 },
    );
  }

  it("runs in the sandbox asked for", async () => {
    expect((await app.runnerHealth()).sandbox.mode).toBe(mode.name);
  });

  it("server-everything: echo, get-sum, get-env (the declared variable reaches it, hidden), progress", async () => {
    await running(everything);
    expect(await modelRuns(everything, "echo", { message: "hello there" })).toContain("Echo: hello there");
    expect(await modelRuns(everything, "get-sum", { a: 2, b: 40 })).toContain("The sum of 2 and 40 is 42.");
    const env = await modelRuns(everything, "get-env");
    expect(env).toContain('"STAVROBOT_PROBE": "[secret]"');
    expect(env).not.toContain(PROBE_SECRET);

    fake.reset();
    fake.enqueue(
      runTool(everything, "trigger-long-running-operation", { duration: 1.5, steps: 3 }),
      textTurn("finished"),
    );
    const events = await progressOf(app, "run the long operation");
    expect(events).toEqual(
      [1, 2, 3].map((step) => ({
        plugin: everything,
        tool: "trigger-long-running-operation",
        progress: step,
        total: 3,
      })),
    );
    expect(fake.requests[1]!.lastUserText).toContain("Long running operation completed");
  });

  it("server-everything as a whole client: resources, templates and prompts read, no roots, its output schema kept", async () => {
    await running(everything);
    expect(await modelRuns(everything, "resources/list")).toContain("demo://resource/static/document/");
    expect(await modelRuns(everything, "resources/templates/list")).toContain(
      "demo://resource/dynamic/text/{resourceId}",
    );
    const text = await modelRuns(everything, "resources/read", { uri: "demo://resource/dynamic/text/7" });
    expect(text).toContain("[resource demo://resource/dynamic/text/7]");
    expect(text).toContain("Resource 7: This is a plaintext resource");
    expect(await modelRuns(everything, "resources/read", { uri: "demo://resource/dynamic/blob/7" })).toMatch(
      /output file[\s\S]*Output files:/,
    );
    expect(await modelRuns(everything, "prompts/list")).toContain("args-prompt");
    expect(
      await modelRuns(everything, "prompts/get", { name: "args-prompt", arguments: { city: "Oslo" } }),
    ).toContain("What's weather in Oslo?");
    expect(await modelRuns(everything, "prompts/get", { name: "args-prompt" })).toContain(
      'Prompt "args-prompt" needs "city".',
    );
    // Its declaration names only its code: the client has no roots to give it.
    expect(await modelRuns(everything, "get-roots-list")).toContain("no roots are currently configured");
    expect(await modelRuns(everything, "get-structured-content", { location: "Chicago" })).toContain(
      "temperature",
    );
  });

  it.runIf(canGrantWrites)(
    "server-filesystem reads and writes in its folder and is refused outside it",
    async () => {
      await running(files);
      // Its roots (what it may reach) are the folder its declaration names.
      expect(await modelRuns(files, "list_allowed_directories")).toContain(at("notes"));
      expect(await modelRuns(files, "read_text_file", { path: at("notes", "todo.txt") })).toContain(
        "buy milk",
      );
      expect(
        await modelRuns(files, "write_file", { path: at("notes", "done.txt"), content: "milk bought" }),
      ).toContain("Successfully wrote");
      expect(readFileSync(at("notes", "done.txt"), "utf8")).toBe("milk bought");
      expect(await modelRuns(files, "list_directory", { path: at("notes") })).toMatch(
        /done\.txt[\s\S]*todo\.txt/,
      );
      const outside = await modelRuns(files, "read_text_file", { path: at("elsewhere", "secret.txt") });
      expect(outside).toContain("Access denied");
      expect(outside).not.toContain("not for the server");
      // Its own readOnlyHint annotations reach the app (the trust gate believes them only where
      // the owner says: [trust] readOnlyHints).
      const tools = (
        (await app.runner("GET", `/bundles/${files}`)).body as {
          tools: { name: string; readOnlyHint?: boolean }[];
        }
      ).tools;
      expect(tools.find((tool) => tool.name === "read_text_file")?.readOnlyHint).toBe(true);
      expect(tools.find((tool) => tool.name === "write_file")?.readOnlyHint).toBeUndefined();
    },
  );

  it.runIf(canGrantWrites)(
    "server-memory (named with underscores): create_entities, then search_nodes after a restart, kept in the named file",
    async () => {
      await running(memory);
      expect(existsSync(at("mcp-state"))).toBe(true);
      expect(
        await modelRuns(memory, "create_entities", {
          entities: [{ name: "Ada", entityType: "person", observations: ["writes the first program"] }],
        }),
      ).toContain("Ada");
      expect(readFileSync(at("mcp-state", "memory.jsonl"), "utf8")).toContain("writes the first program");

      await app.stop();
      app = await startProduct(testEnv, { env: productEnv() });
      await running(memory);
      expect(await modelRuns(memory, "search_nodes", { query: "Ada" })).toContain("writes the first program");
    },
  );

  it("server-everything asks the owner mid call (elicitation), and the owner's /answer goes back to it", async () => {
    await running(everything);
    fake.reset();
    fake.enqueue(runTool(everything, "trigger-elicitation-request", {}), textTurn("done"));
    const turn = chat(app, "run trigger-elicitation-request");
    // The owner has no channel here: the question waits among the console's unseen answers.
    const question = await vi.waitFor(
      async () => {
        const pending = await fetch(`http://127.0.0.1:${app.port}/api/answers/pending`, {
          headers: { Authorization: basicAuthHeader(PASSWORD) },
        });
        const { answers } = (await pending.json()) as { answers: { response: string }[] };
        const asked = answers.find((answer) =>
          answer.response.includes(`MCP server "${everything}" asks you`),
        );
        expect(asked).toBeDefined();
        return asked!.response;
      },
      { timeout: 30_000, interval: 250 },
    );
    expect(question).toContain('(while its tool "trigger-elicitation-request" runs)');
    expect(question).toContain("- integer (whole number 1–100; default 42)");
    expect(question).toContain("- titledSingleSelectEnum (one of: hero-1 = Superman, hero-2 = Green Lantern");
    const id = /\/answer ([a-z2-9]{4})/.exec(question)![1]!;
    const wrong = await chat(app, `/answer ${id} name=Ada email=ada`);
    expect(String(wrong.body.response)).toContain('"email" must be an email address');
    const right = await chat(
      app,
      `/answer ${id} name="Ada Lovelace" check=yes integer=7 untitledMultipleSelectEnum=Piano,Drums titledSingleSelectEnum="Wonder Woman"`,
    );
    expect(right.body.response).toBe(`Answered: MCP server "${everything}" has your answer.`);
    expect((await turn).body.response).toMatch(/done$/);
    const result = fake.requests[1]!.lastUserText;
    expect(result).toContain("User provided the requested information!");
    expect(result).toContain("- Name: Ada Lovelace");
    expect(result).toContain("- Favorite Integer: 7");
    expect(result).toContain('"hero-3"');
    expect(result).toContain('"Piano"');
  });

  it("server-memory through npx -y at a pinned version: fetched on its first start, then used", async () => {
    await running(npx, 300_000);
    expect(
      await modelRuns(npx, "create_entities", {
        entities: [{ name: "Grace", entityType: "person", observations: ["found a moth"] }],
      }),
    ).toContain("Grace");
    expect(await modelRuns(npx, "read_graph")).toContain("found a moth");
  }, 360_000);
});

function q(value: string): string {
  return JSON.stringify(value);
}
