import { rmSync } from "node:fs";
import { createServer } from "node:net";
import type { Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
// Plugins of the other formats as their authors publish them, served by a loopback git daemon.
import {
  makeTempRoot,
  startGitDaemon,
  uniqueName,
  type GitDaemon,
} from "../../plugin-runner/test/helpers.js";
import {
  commitAll,
  probePlugin,
  writeCyclopOnePlugin,
  writeFiles,
  writeWorkbenchPlugin,
} from "../../plugin-runner/test/format-fixtures.js";
import { chat, configFor, createTestEnv, type TestEnv, TRUST_PLUGIN_MANAGEMENT } from "./helpers/app.js";
import { raw } from "./helpers/http.js";
import { startProduct, type Product } from "./helpers/product.js";

/**
 * Plugins written for Cyclop One and Workbench, built at test time, installed from a loopback git
 * server by the model and run through the agent under `npm start` (the bundles; the LLM is a fake
 * Anthropic server): approval refused then given by the owner, parameters checked against each
 * tool's JSON Schema, is_error, plain-text output and data kept across calls; every kind of
 * Workbench result and a dotted tool name. (A run() that loops for ever is stopped at the
 * runner's limit: plugin-runner/test/workbench.test.ts, with a short limit.)
 */
const suffix = uniqueName("e2e").slice(4);
const cyclop = `polyglot-${suffix}`;
const workbench = `wb-tools-${suffix}`;
const probe = `probe-${suffix}`;
const twin = `twin-${suffix}`;

let fake: FakeLlmServer;
let testEnv: TestEnv;
let app: Product;
let daemon: GitDaemon;
let repos: string;
let listener: Server;
let port: number;
let connections = 0;

beforeAll(async () => {
  repos = makeTempRoot("formats-e2e-repos");
  // It asks for network, so it runs in either sandbox mode.
  writeCyclopOnePlugin(join(repos, "polyglot"), {
    name: cyclop,
    permissions: ["network", "filesystem:read"],
  });
  commitAll(join(repos, "polyglot"));
  writeWorkbenchPlugin(join(repos, "workbench", "plugins", `wb_tools_${suffix}`));
  commitAll(join(repos, "workbench"));
  // Hostile: no network asked for, yet it dials; it reads another plugin's data directory.
  probePlugin(join(repos, "probe"), probe, "1.0.0", []);
  commitAll(join(repos, "probe"));
  // Declares a tool name the polyglot plugin offers too.
  writeFiles(join(repos, "twin"), {
    "plugin.json": JSON.stringify({
      name: twin,
      version: "1.0.0",
      description: "Same tool name as another plugin.",
      entrypoint: "run.sh",
      permissions: ["network"],
      tools: [{ name: "hello_greet", description: "Greets differently." }],
    }),
    "run.sh": '!#!/bin/sh\ncat >/dev/null\necho \'{"result":"greetings from the twin"}\'\n',
  });
  commitAll(join(repos, "twin"));
  daemon = await startGitDaemon(repos);

  listener = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  port = await new Promise<number>((resolve) =>
    listener.listen(0, "127.0.0.1", () => resolve((listener.address() as { port: number }).port)),
  );
  fake = await startFakeAnthropic();
  testEnv = await createTestEnv(configFor(fake, "anthropic", TRUST_PLUGIN_MANAGEMENT));
  app = await startProduct(testEnv);
}, 120_000);

afterAll(async () => {
  // Removing a plugin removes its user too (they are this machine's, not the test's).
  for (const name of [cyclop, workbench, probe, twin]) await app?.runner("POST", "/remove", { name });
  await app?.stop();
  await new Promise((resolve) => listener?.close(resolve));
  await daemon?.stop();
  await fake?.close();
  await testEnv?.cleanup();
  if (repos) rmSync(repos, { recursive: true, force: true });
});

const runTool = (plugin: string, tool: string, parameters: Record<string, unknown> = {}) =>
  toolTurn("run_plugin_tool", { plugin, tool, parameters: JSON.stringify(parameters) });

/** The model runs `tool` and answers `reply`; returns the tool result the model was given. */
async function modelRuns(
  plugin: string,
  tool: string,
  parameters: Record<string, unknown> = {},
): Promise<string> {
  fake.reset();
  fake.enqueue(runTool(plugin, tool, parameters), textTurn("done"));
  const reply = await chat(app, `run ${tool}`);
  expect(reply.body.response).toMatch(/done$/);
  return fake.requests[1]!.lastUserText;
}

describe("Cyclop One and Workbench plugins through the agent", () => {
  it("the model installs a Cyclop One plugin; the owner is told it waits for approval, and its tools refuse until then", async () => {
    fake.enqueue(
      toolTurn("manage_plugins", { action: "install", url: daemon.url("polyglot") }),
      textTurn("Installed; it needs your approval."),
      textTurn("A plugin waits for your approval."),
    );
    const installed = await chat(app, "install the polyglot plugin");
    expect(installed.body.response).toBe("Installed; it needs your approval.");
    const installResult = fake.requests[1]!.lastUserText;
    expect(installResult).toContain(`Plugin "${cyclop}" installed.`);
    expect(installResult).toContain("Its format is Cyclop One.");
    expect(installResult).toContain("wait for the owner's approval of version 1.0.0");
    // The runner's notice is a turn of its own, answered to the owner.
    await vi.waitFor(() => expect(fake.requests).toHaveLength(3), { timeout: 30_000 });
    const notice = fake.requests[2]!.lastUserText;
    expect(notice).toContain(`Source: plugin:${cyclop}/approval`);
    expect(notice).toContain("network, filesystem:read");
    await app.quiet();

    const refused = await modelRuns(cyclop, "hello_greet", { name: "Alice" });
    expect(refused).toContain("needs the owner's approval");
    expect(refused).toContain(`POST /api/settings/plugins/approve {"name": "${cyclop}"}`);
    expect(refused).not.toContain("Hello, Alice!");
  });

  it("the owner approves; the model then runs its tools in shell, Python, Node and C", async () => {
    const approved = await raw(app.port, "POST", "/api/settings/plugins/approve", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: cyclop }),
    });
    expect(approved.status).toBe(200);
    expect(approved.json.approved).toContain("hello_greet");

    fake.reset();
    fake.enqueue(toolTurn("manage_plugins", { action: "show", name: cyclop }), textTurn("seen"));
    await chat(app, "show it");
    const shown = fake.requests[1]!.lastUserText;
    expect(shown).toContain("Cyclop One");
    expect(shown).toContain("input_schema");
    expect(shown).toContain("The name to greet");

    expect(await modelRuns(cyclop, "hello_greet", { name: "Alice" })).toContain("Hello, Alice!");
    expect(await modelRuns(cyclop, "py_check", { fail: true })).toMatch(/failed:\n`{3,}\nasked to fail/);
    expect(await modelRuns(cyclop, "c_info")).toMatch(/compiled tool read \d+ bytes in \//);
    expect(await modelRuns(cyclop, "kv_set", { key: "city", value: "Oslo" })).toContain("stored city");
    expect(await modelRuns(cyclop, "kv_get", { key: "city" })).toContain("Oslo");
    expect(await modelRuns(cyclop, "hello_greet", {})).toContain("must have required property 'name'");
  });

  it("the model installs a Workbench plugin from a folder and gets each kind of result", async () => {
    fake.reset();
    fake.enqueue(
      toolTurn("manage_plugins", {
        action: "install",
        url: `${daemon.url("workbench")}#path=plugins/wb_tools_${suffix}`,
      }),
      textTurn("Installed."),
    );
    await chat(app, "install the workbench tools");
    expect(fake.requests[1]!.lastUserText).toContain(`Plugin "${workbench}" installed.`);
    expect(fake.requests[1]!.lastUserText).toContain("Its format is Workbench.");

    const echo = await modelRuns(workbench, "example.echo", { message: "two words" });
    expect(echo).toContain("two words");
    expect(echo).toContain("characterCount");
    expect(await modelRuns(workbench, "text.plain", { name: "Ada" })).toContain(
      "Hello, Ada! Welcome to Workbench.",
    );
    expect(await modelRuns(workbench, "text.fail")).toMatch(/failed:\n`{3,}\nCity not found/);
    expect(await modelRuns(workbench, "data.blocks")).toContain("Weather Report:\nTemperature: 72F");
    expect(await modelRuns(workbench, "data.object")).toMatch(/metadata:\n {2}temperature: 29\n {2}unit: F/);
  });

  it("a Workbench tool's parameters are checked against its inputSchema before it runs", async () => {
    const refused = await modelRuns(workbench, "example.echo", { message: 5 });
    expect(refused).toContain("/message must be string");
    expect(refused).not.toContain("characterCount");
    expect(await modelRuns(workbench, "example.echo", { message: "now right" })).toContain("now right");
  });

  it("the owner switches a plugin's network off and sees it in the list", async () => {
    const off = await raw(app.port, "POST", "/api/settings/plugins/network", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: workbench, network: false }),
    });
    expect(off.status).toBe(200);
    const list = await raw(app.port, "GET", "/api/settings/plugins/list");
    const entry = list.json.plugins.find((plugin: { name: string }) => plugin.name === workbench);
    expect(entry).toMatchObject({ format: "workbench", network: false, networkAllowed: true });
    const refusedMore = await raw(app.port, "POST", "/api/settings/plugins/network", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "not a plugin!", network: true }),
    });
    expect(refusedMore.status).toBe(400);
  });
});

describe("hostile plugins through the agent", () => {
  /** The model installs a plugin; the runner's approval notice (a turn of its own) is answered. */
  async function modelInstalls(url: string, waitsForApproval: boolean): Promise<string> {
    fake.reset();
    fake.enqueue(toolTurn("manage_plugins", { action: "install", url }), textTurn("Installed."));
    if (waitsForApproval) fake.enqueue(textTurn("It waits for your approval."));
    await chat(app, "install it");
    if (waitsForApproval) await vi.waitFor(() => expect(fake.requests).toHaveLength(3), { timeout: 30_000 });
    await app.quiet();
    return fake.requests[1]!.lastUserText;
  }

  const approve = (name: string) =>
    raw(app.port, "POST", "/api/settings/plugins/approve", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name }),
    });

  it("a plugin without network cannot reach a loopback port, nor another plugin's data", async () => {
    await modelInstalls(daemon.url("probe"), true);
    expect((await approve(probe)).status).toBe(200);
    const enforced = (await app.runnerHealth()).sandbox.mode === "namespaces";
    const dialled = await modelRuns(probe, "dial", { port });
    expect(dialled).toMatch(
      enforced ? /no connection: .*(refused|unreachable)/i : /cannot remove the network/,
    );
    expect(connections).toBe(0);
    if (enforced) {
      const peeked = await modelRuns(probe, "peek", { path: `/plugin-data/${cyclop}/store.json` });
      expect(peeked).toMatch(/refused: .*No such file or directory/);
      expect(peeked).not.toContain("Oslo");
    }
  });

  it("a tool name another plugin declares too is reported at install, and each plugin runs its own", async () => {
    const installed = await modelInstalls(daemon.url("twin"), true);
    expect(installed).toContain(`Tool "hello_greet" is also offered by plugin "${cyclop}"`);
    expect((await approve(twin)).status).toBe(200);
    expect(await modelRuns(twin, "hello_greet")).toContain("greetings from the twin");
    expect(await modelRuns(cyclop, "hello_greet", { name: "Eve" })).toContain("Hello, Eve!");
  });
});
