import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commitAll, writeCyclopOnePlugin, writeFiles } from "./format-fixtures.js";
import type { GitDaemon, TestPluginHost } from "./helpers.js";
import { makeTempRoot, sandboxModes, startGitDaemon, startPluginHost, uniqueName } from "./helpers.js";

/**
 * Cyclop One plugins, installed from a loopback git server and run as their guide and their host
 * define: tools in shell, Python, Node and C; top-level and per-tool entrypoints; `is_error`;
 * non-JSON output; empty output and a failing exit as errors; data kept across calls.
 */
describe.each(sandboxModes())("Cyclop One plugins (%s sandbox)", (mode, plainSandbox) => {
  let t: TestPluginHost;
  let daemon: GitDaemon;
  let repos: string;
  const suffix = uniqueName("c1").slice(3);
  const name = `multi-lang-${suffix}`;

  beforeAll(async () => {
    repos = makeTempRoot("cyclopone-repos");
    // The manifest's name is not a valid plugin name as it is: the runner derives one.
    writeCyclopOnePlugin(join(repos, "multi"), {
      name: `Multi_Lang.${suffix}`,
      permissions: ["filesystem:read"],
    });
    commitAll(join(repos, "multi"));
    daemon = await startGitDaemon(repos);
    // Plain mode cannot cut the network of these plugins (they did not ask for it): allowed here.
    t = await startPluginHost({ plainSandbox, allowWithoutNetworkCut: true });
  }, 60_000);

  afterAll(async () => {
    await t?.request("POST", "/remove", { name });
    await t?.close();
    await daemon?.stop();
    rmSync(repos, { recursive: true, force: true });
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  const run = (tool: string, params: Record<string, unknown>) =>
    t.request("POST", `/bundles/${name}/tools/${tool}/run`, params);

  it("installs from git, saying the name it derived and the format", async () => {
    const installed = await t.request("POST", "/install", { url: daemon.url("multi") });
    expect(installed.status).toBe(200);
    expect(installed.body.name).toBe(name);
    expect(installed.body.format).toBe("cyclopone");
    expect(installed.body.message).toContain(`Plugin "${name}" installed.`);
    expect(installed.body.message).toContain("Cyclop One");
    expect(installed.body.message).toContain("wait for the owner's approval of version 1.0.0");
    expect((await t.request("POST", "/approve", { name })).body.approved).toHaveLength(7);
    const list = await t.request("GET", "/bundles");
    expect(list.body.plugins).toContainEqual(
      expect.objectContaining({ name, format: "cyclopone", editable: false }),
    );
  });

  it("shows each tool's parameters as the plugin declared them", async () => {
    const show = await t.request("GET", `/bundles/${name}`);
    const hello = show.body.tools.find((tool: { name: string }) => tool.name === "hello_greet");
    expect(hello.schema).toEqual({
      type: "object",
      properties: { name: { type: "string", description: "The name to greet" } },
      required: ["name"],
    });
    expect(hello.parameters).toEqual({ name: { type: "string", description: "The name to greet" } });
    expect(show.body.tools.map((tool: { name: string }) => tool.name)).toEqual([
      "hello_greet",
      "py_check",
      "kv_set",
      "kv_get",
      "c_info",
      "say_nothing",
      "crash",
    ]);
  });

  it("runs the documented shell example through the top-level entrypoint", async () => {
    const answer = await run("hello_greet", { name: "Alice" });
    expect(answer.body).toEqual({ success: true, output: "Hello, Alice!" });
  });

  it("checks parameters against the declared JSON Schema", async () => {
    const missing = await run("hello_greet", {});
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatch(/Invalid parameters: .*must have required property 'name'/);
    const wrong = await run("hello_greet", { name: 42 });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toContain("/name must be string");
  });

  it("runs Python through its own entrypoint with the request, the context, cwd and variables", async () => {
    const answer = await run("py_check", {});
    expect(answer.body.success).toBe(true);
    const seen = JSON.parse(answer.body.output as string);
    const pluginDir = mode === "namespaces" ? `/plugins/${name}` : join(t.pluginsDir, name);
    const dataDir = mode === "namespaces" ? `/plugin-data/${name}` : join(t.root, "plugin-data", name);
    expect(seen).toEqual({
      tool: "py_check",
      cwd: pluginDir,
      context: { plugin_dir: pluginDir, data_dir: dataDir },
      env_plugin_dir: pluginDir,
      env_data_dir: dataDir,
    });
    const failed = await run("py_check", { fail: true });
    expect(failed.body).toEqual({ success: false, error: "asked to fail" });
  });

  it("keeps a Node tool's data across calls, in its data directory", async () => {
    expect((await run("kv_get", { key: "colour" })).body).toEqual({
      success: false,
      error: "Key not found: colour",
    });
    expect((await run("kv_set", { key: "colour", value: "blue" })).body).toEqual({
      success: true,
      output: "stored colour",
    });
    expect((await run("kv_get", { key: "colour" })).body).toEqual({ success: true, output: "blue" });
  });

  it("returns a compiled program's plain-text output as the result", async () => {
    const answer = await run("c_info", {});
    expect(answer.body.success).toBe(true);
    expect(answer.body.output).toMatch(/^compiled tool read \d+ bytes in \//);
  });

  it("answers empty output and a failing exit as errors, with the start of stderr", async () => {
    expect((await run("say_nothing", {})).body).toEqual({
      success: false,
      error: "Plugin returned no output",
    });
    expect((await run("crash", {})).body).toEqual({
      success: false,
      error: "Plugin process failed (exit 3): the crash tool broke",
    });
  });
});

describe("Cyclop One manifests (plain sandbox)", () => {
  let t: TestPluginHost;
  let daemon: GitDaemon;
  let repos: string;
  const names: string[] = [];

  beforeAll(async () => {
    repos = makeTempRoot("cyclopone-manifests");
    daemon = await startGitDaemon(repos);
    t = await startPluginHost({ plainSandbox: true, allowWithoutNetworkCut: true });
  });

  afterAll(async () => {
    for (const name of names) await t?.request("POST", "/remove", { name });
    await t?.close();
    await daemon?.stop();
    rmSync(repos, { recursive: true, force: true });
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  it("refuses absolute and `..` entrypoints and tools without one, keeping the rest", async () => {
    const name = uniqueName("guarded");
    names.push(name);
    const repo = join(repos, "guarded");
    mkdirSync(repo);
    writeFiles(repo, {
      "plugin.json": JSON.stringify({
        name,
        version: "1.0.0",
        description: "Entrypoints good and bad.",
        permissions: [],
        tools: [
          { name: "fine", description: "ok", entrypoint: "ok.sh" },
          { name: "absolute", description: "no", entrypoint: "/bin/sh" },
          { name: "climbing", description: "no", entrypoint: "../../../bin/sh" },
          { name: "nowhere", description: "no" },
        ],
      }),
      "ok.sh": '!#!/bin/sh\necho \'{"result":"fine","is_error":false}\'\n',
    });
    commitAll(repo);
    const installed = await t.request("POST", "/install", { url: daemon.url("guarded") });
    expect(installed.status).toBe(200);
    await t.request("POST", "/approve", { name });
    const warnings = installed.body.warnings.join("\n");
    expect(warnings).toMatch(/tool "absolute" skipped: its entrypoint "\/bin\/sh" must be a relative path/);
    expect(warnings).toMatch(/tool "climbing" skipped: its entrypoint .* must be a relative path/);
    expect(warnings).toMatch(/tool "nowhere" skipped: it has no entrypoint/);
    const show = await t.request("GET", `/bundles/${name}`);
    expect(show.body.tools.map((tool: { name: string }) => tool.name)).toEqual(["fine"]);
    expect((await t.request("POST", `/bundles/${name}/tools/fine/run`, {})).body).toEqual({
      success: true,
      output: "fine",
    });
  });

  it("installs a plugin from a folder of a larger repository, and updates it from there", async () => {
    const repo = join(repos, "monorepo");
    const name = uniqueName("nested");
    names.push(name);
    const plugin = (version: string) => ({
      "plugins/Nested_One/plugin.json": JSON.stringify({
        name,
        version,
        description: `Nested ${version}`,
        entrypoint: "run.sh",
        permissions: [],
        tools: [{ name: "nested_version", description: "Its version" }],
      }),
      "plugins/Nested_One/run.sh": `!#!/bin/sh\ncat >/dev/null\necho '{"result":"${version}"}'\n`,
      "README.md": "Not a plugin at the root.",
    });
    writeFiles(repo, plugin("1.0.0"));
    commitAll(repo);
    const atRoot = await t.request("POST", "/install", { url: daemon.url("monorepo") });
    expect(atRoot.status).toBe(400);
    expect(atRoot.body.error).toMatch(/Invalid plugin: no plugin found: expected manifest.json/);
    const missing = await t.request("POST", "/install", {
      url: `${daemon.url("monorepo")}#path=plugins/none`,
    });
    expect(missing.body.error).toMatch(/has no folder "plugins\/none"/);
    const climbing = await t.request("POST", "/install", { url: `${daemon.url("monorepo")}#path=../x` });
    expect(climbing.status).toBe(400);

    const installed = await t.request("POST", "/install", {
      url: `${daemon.url("monorepo")}#path=plugins/Nested_One`,
    });
    expect(installed.status).toBe(200);
    expect(installed.body.name).toBe(name);
    await t.request("POST", "/approve", { name });
    const list = await t.request("GET", "/bundles");
    expect(list.body.plugins).toContainEqual(expect.objectContaining({ name, editable: false }));
    expect((await t.request("POST", `/bundles/${name}/tools/nested_version/run`, {})).body.output).toBe(
      "1.0.0",
    );

    writeFiles(repo, plugin("2.0.0"));
    commitAll(repo, "v2");
    const updated = await t.request("POST", "/update", { name });
    expect(updated.status).toBe(200);
    await t.request("POST", "/approve", { name });
    expect((await t.request("POST", `/bundles/${name}/tools/nested_version/run`, {})).body.output).toBe(
      "2.0.0",
    );
  });

  it("reports a tool name another plugin offers too, and runs each through its own plugin", async () => {
    const first = uniqueName("same-a");
    const second = uniqueName("same-b");
    names.push(first, second);
    for (const [repoName, name, text] of [
      ["same-a", first, "from a"],
      ["same-b", second, "from b"],
    ] as const) {
      const repo = join(repos, repoName);
      writeFiles(repo, {
        "plugin.json": JSON.stringify({
          name,
          version: "1.0.0",
          description: "Clashing tool names.",
          entrypoint: "run.sh",
          permissions: [],
          tools: [{ name: "shared_tool", description: "Same name in two plugins" }],
        }),
        "run.sh": `!#!/bin/sh\ncat >/dev/null\necho '{"result":"${text}"}'\n`,
      });
      commitAll(repo);
    }
    const a = await t.request("POST", "/install", { url: daemon.url("same-a") });
    expect(a.body.warnings ?? []).toEqual([]);
    const b = await t.request("POST", "/install", { url: daemon.url("same-b") });
    for (const name of [first, second]) await t.request("POST", "/approve", { name });
    expect(b.body.warnings).toContain(
      `Tool "shared_tool" is also offered by plugin "${first}": each is run through its own plugin's name.`,
    );
    expect((await t.request("POST", `/bundles/${first}/tools/shared_tool/run`, {})).body.output).toBe(
      "from a",
    );
    expect((await t.request("POST", `/bundles/${second}/tools/shared_tool/run`, {})).body.output).toBe(
      "from b",
    );
  });
});
