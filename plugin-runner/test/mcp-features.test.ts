import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bundleFixtureServer } from "./mcp/fixtures.js";
import { RED_PIXEL_PNG } from "./mcp/fixture-server.js";
import { makeTempRoot, startPluginHost, uniqueName, type TestPluginHost } from "./helpers.js";

/**
 * The MCP client as a whole through the runner's routes, against our low-level features server
 * over stdio: tools, resources, templates and prompts listed in pages, resources read (text and
 * binary), prompts fetched with their arguments, the roots the declaration gave, output schemas.
 * The first fixture server (no resources, no prompts) gets none of the client's own tools. Both
 * sandbox modes.
 */
const TOKEN = "features-secret-token-93d1aa";

describe.each([
  { mode: "the sandbox's default mode", plainSandbox: false },
  { mode: "the plain sandbox", plainSandbox: true },
])("the MCP client as a whole, in $mode", ({ plainSandbox }) => {
  const features = uniqueName("mcp-feat");
  const plain = uniqueName("mcp-plain");

  let host: TestPluginHost;
  let root: string;
  let notes: string;
  let archive: string;

  beforeAll(async () => {
    root = makeTempRoot("mcp-features");
    mkdirSync(join(root, "server"), { mode: 0o755 });
    const script = await bundleFixtureServer(join(root, "server"), "features");
    const fixture = await bundleFixtureServer(join(root, "server"));
    notes = join(root, "notes");
    archive = join(root, "archive");
    mkdirSync(notes, { mode: 0o755 });
    mkdirSync(archive, { mode: 0o755 });
    const file = join(root, "mcp-servers.json");
    writeFileSync(
      file,
      JSON.stringify({
        [features]: {
          command: "node",
          args: [script, notes],
          readOnlyPaths: [archive],
          env: { FEATURES_TOKEN: TOKEN },
          timeoutSeconds: 10,
        },
        [plain]: { command: "node", args: [fixture], timeoutSeconds: 10 },
      }),
    );
    host = await startPluginHost({ root: join(root, "host"), mcpServersFile: file, plainSandbox });
    for (const name of [features, plain])
      await vi.waitFor(
        async () => {
          const detail = await host.request("GET", `/bundles/${name}`);
          expect((detail.body as { server: { state: string } }).server.state).toBe("running");
        },
        { timeout: 30_000 },
      );
  }, 120_000);

  afterAll(async () => {
    await host?.close();
    for (const name of [features, plain]) await host?.host.isolation.removeUser(name);
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const run = (plugin: string, tool: string, body: Record<string, unknown> = {}) =>
    host.request("POST", `/bundles/${plugin}/tools/${encodeURIComponent(tool)}/run`, body);

  async function output(tool: string, body: Record<string, unknown> = {}) {
    const answer = await run(features, tool, body);
    expect(answer.status).toBe(200);
    return answer.body as {
      success: boolean;
      output?: unknown;
      error?: string;
      files?: { filename: string; data: string }[];
    };
  }

  it("lists every page of the server's tools, then the client's own tools for what it offers", async () => {
    const detail = (await host.request("GET", `/bundles/${features}`)).body as {
      tools: { name: string; schema?: unknown }[];
      description: string;
    };
    expect(detail.tools.map((tool) => tool.name)).toEqual([
      "first-page",
      "shape-kept",
      "shape-broken",
      "shape-missing",
      "second-page",
      "roots",
      "resources/list",
      "resources/templates/list",
      "resources/read",
      "prompts/list",
      "prompts/get",
    ]);
    // The description names the server's tools, then the client's.
    expect(detail.description).toContain("second-page");
    expect(detail.description).toMatch(
      /with first-page, shape-kept, shape-broken, shape-missing, second-page, roots\. Also resources\/list, resources\/templates\/list, resources\/read, prompts\/list, prompts\/get\.$/,
    );
    expect(await output("second-page")).toEqual({ success: true, output: "second-page ran" });
  });

  it("gives a server without resources or prompts none of those tools", async () => {
    const detail = (await host.request("GET", `/bundles/${plain}`)).body as { tools: { name: string }[] };
    expect(detail.tools.some((tool) => tool.name.includes("/"))).toBe(false);
    const answer = await run(plain, "resources/list");
    expect(answer.status).toBe(404);
  });

  it("lists resources and templates across pages", async () => {
    const resources = await output("resources/list");
    expect(resources.success).toBe(true);
    expect(resources.output).toContain("- memo://note (note, text/plain): A short note.");
    expect(resources.output).toContain("- memo://pixel.png (pixel, image/png)");
    const templates = await output("resources/templates/list");
    expect(templates.output).toContain("- memo://item/{id} (item): One item by id.");
    expect(templates.output).toContain("- memo://day/{date} (day, text/plain)");
  });

  it("reads a text resource as text, a binary one as a file, a template filled in", async () => {
    expect(await output("resources/read", { uri: "memo://note" })).toEqual({
      success: true,
      output: "[resource memo://note]\nBuy bread and call Ada.",
    });
    const pixel = await output("resources/read", { uri: "memo://pixel.png" });
    expect(pixel.success).toBe(true);
    expect(pixel.output).toBe("[resource memo://pixel.png (image/png): output file pixel.png]");
    expect(pixel.files).toEqual([{ filename: "pixel.png", data: RED_PIXEL_PNG }]);
    expect(await output("resources/read", { uri: "memo://item/42" })).toMatchObject({
      output: "[resource memo://item/42]\nitem number 42",
    });
  });

  it("hides the declaration's secrets in what a resource says", async () => {
    expect(await output("resources/read", { uri: "memo://token" })).toEqual({
      success: true,
      output: "[resource memo://token]\ntoken [secret]",
    });
  });

  it("says which resource the server does not have, and refuses a read without a uri", async () => {
    const missing = await output("resources/read", { uri: "memo://nothing" });
    expect(missing.success).toBe(false);
    expect(missing.error).toContain("Resource not found: memo://nothing");
    const bad = await run(features, "resources/read", {});
    expect(bad.status).toBe(400);
    expect((bad.body as { error: string }).error).toContain("must have required property 'uri'");
    const extra = await run(features, "resources/read", { uri: "memo://note", depth: 2 });
    expect(extra.status).toBe(400);
  });

  it("lists prompts across pages with their arguments", async () => {
    const prompts = await output("prompts/list");
    expect(prompts.output).toContain(
      "- greet: Greets someone. Arguments: name (required) – Who; mood – How.",
    );
    expect(prompts.output).toContain("- dialogue: A short exchange with a picture.");
  });

  it("fetches a prompt with its arguments; several roles are headed and a picture is a file", async () => {
    expect(
      await output("prompts/get", { name: "greet", arguments: { name: "Ada", mood: "cheerful" } }),
    ).toEqual({
      success: true,
      output: "Write a cheerful greeting for Ada.",
    });
    const dialogue = await output("prompts/get", { name: "dialogue" });
    expect(dialogue.output).toBe(
      "[user]\nWhat is in the picture?\n[assistant]\nA single red pixel.\n[user]\n[image image/png: output file prompt-dialogue-1.png]",
    );
    expect(dialogue.files).toEqual([{ filename: "prompt-dialogue-1.png", data: RED_PIXEL_PNG }]);
  });

  it("refuses an unknown prompt, a missing argument and an unknown one, naming what is there", async () => {
    expect(await output("prompts/get", { name: "farewell" })).toEqual({
      success: false,
      error: `MCP server "${features}" has no prompt "farewell". Its prompts: greet, dialogue.`,
    });
    const missing = await output("prompts/get", { name: "greet", arguments: { mood: "dry" } });
    expect(missing.error).toBe('Prompt "greet" needs "name". Arguments: name (required) – Who; mood – How.');
    const unknown = await output("prompts/get", { name: "greet", arguments: { name: "Ada", tone: "x" } });
    expect(unknown.error).toBe('Prompt "greet" has no argument "tone". Its arguments: name, mood.');
    const notText = await run(features, "prompts/get", { name: "greet", arguments: { name: 5 } });
    expect(notText.status).toBe(400);
    expect((notText.body as { error: string }).error).toContain("/arguments/name must be string");
  });

  it("answers roots/list with the paths the declaration gave the server, not its code", async () => {
    const roots = await output("roots");
    const uris = String(roots.output).split("\n");
    expect(uris).toEqual(expect.arrayContaining([pathToFileURL(notes).href, pathToFileURL(archive).href]));
    expect(uris.some((uri) => uri.includes("/server"))).toBe(false);
  });

  it("checks structured content against the tool's output schema", async () => {
    expect(await output("shape-kept")).toEqual({
      success: true,
      output: { content: "three", structuredContent: { count: 3 } },
    });
    expect(await output("shape-broken")).toEqual({
      success: false,
      error: `Tool "shape-broken" of MCP server "${features}" returned structured content that does not match its output schema: /count must be number`,
    });
    expect(await output("shape-missing")).toEqual({
      success: false,
      error: `Tool "shape-missing" of MCP server "${features}" declares an output schema but returned no structured content.`,
    });
  });
});
