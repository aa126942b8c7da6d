import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { TestPluginHost } from "./helpers.js";
import { makeTempRoot, sandboxModes, startPluginHost, uniqueName } from "./helpers.js";
import { serveDirectory } from "@stavrobot/common/test-support";
import { buildEchoLibrary, skillText, zipFiles } from "./osaurus-fixtures.js";

/**
 * Osaurus plugins: a C library with the Osaurus ABI, compiled here with gcc (v1 and v2 entry
 * points), zipped as `<plugin_id>-<version>.zip` with a SKILL.md in a subfolder, served on a
 * loopback port and installed by URL, then run in its own host process in the sandbox.
 */
describe.each(sandboxModes())("Osaurus plugins (%s sandbox)", (mode, plainSandbox) => {
  let t: TestPluginHost;
  let files: string;
  let server: { url: string; close(): Promise<void> };
  const suffix = uniqueName("osr").slice(4);
  const echoId = `test.echo${suffix}`;
  const echo = `test-echo${suffix}`;
  const v1Id = `test.v1${suffix}`;
  const v1 = `test-v1${suffix}`;
  const renamed = `test-manifest${suffix}`;

  beforeAll(async () => {
    files = makeTempRoot("osaurus-packages");
    const v2Lib = buildEchoLibrary(join(files, "build", "libecho.so"), { pluginId: echoId });
    const v1Lib = buildEchoLibrary(join(files, "build", "libv1.so"), { pluginId: v1Id, v1Only: true });
    const manifestLib = buildEchoLibrary(join(files, "build", "libmanifest.so"), {
      pluginId: `Test.Manifest${suffix}`,
    });
    // A single wrapper folder, a skill in a subfolder, one at the top, one invalid, a README.
    zipFiles(files, `${echoId}-1.0.0.zip`, {
      [`${echoId}/libecho.so`]: readFileSync(v2Lib),
      [`${echoId}/README.md`]: "The echo plugin.",
      [`${echoId}/SKILL.md`]: skillText("echo-basics", "How to echo things with the echo plugin."),
      [`${echoId}/guides/slow/SKILL.md`]: skillText("slow-work", "When a tool is slow: what to expect."),
      [`${echoId}/broken/SKILL.md`]: "no frontmatter here",
    });
    zipFiles(files, `${v1Id}-2.3.1-beta.1.zip`, { "libv1.so": readFileSync(v1Lib) });
    zipFiles(files, `wrong.name-1.0.0.zip`, { "libmanifest.so": readFileSync(manifestLib) });
    // Osaurus's published builds: a Mach-O library.
    const macho = Buffer.alloc(64);
    macho.writeUInt32BE(0xcffaedfe, 0);
    zipFiles(files, `test.mac${suffix}-1.0.0.zip`, { "libMac.dylib": macho, "SKILL.md": "x" });
    zipFiles(files, `test.nolib${suffix}-1.0.0.zip`, { "README.md": "nothing to load" });
    zipFiles(files, `badname.zip`, { "libecho.so": readFileSync(v2Lib) });
    zipFiles(files, `test.badver${suffix}-1.0.zip`, { "libecho.so": readFileSync(v2Lib) });
    server = await serveDirectory(files);
    t = await startPluginHost({ plainSandbox, limits: { syncTimeoutMs: 3_000 } });
  }, 120_000);

  afterAll(async () => {
    for (const name of [echo, v1, renamed]) await t?.request("POST", "/remove", { name });
    await t?.close();
    await server?.close();
    if (files) rmSync(files, { recursive: true, force: true });
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  const run = (tool: string, params: Record<string, unknown> = {}, plugin = echo) =>
    t.request("POST", `/bundles/${plugin}/tools/${tool}/run`, params);

  it("installs from the URL of <plugin_id>-<version>.zip, out of its wrapper folder, with its skills", async () => {
    const installed = await t.request("POST", "/install", { url: `${server.url}/${echoId}-1.0.0.zip` });
    expect(installed.status).toBe(200);
    expect(installed.body).toMatchObject({ name: echo, format: "osaurus" });
    expect(installed.body.message).toContain("Its format is Osaurus.");
    expect(installed.body.message).toContain("not verified: no trusted minisign key is configured");
    expect(installed.body.message).toContain("2 skill(s): echo-basics, slow-work");
    expect(installed.body.message).toContain("wait for the owner's approval");
    expect(installed.body.warnings.join("\n")).toMatch(
      /Skill broken\/SKILL.md left out: it has no frontmatter/,
    );
    expect(installed.body.config).toEqual({
      api_key: { description: "API key", required: false, configured: false },
    });

    const listed = await t.request("GET", "/bundles");
    const summary = listed.body.plugins.find((plugin: { name: string }) => plugin.name === echo);
    expect(summary).toMatchObject({ format: "osaurus", version: "1.0.0", verified: false });
    expect(summary.skills).toEqual([
      { name: "echo-basics", description: "How to echo things with the echo plugin." },
      { name: "slow-work", description: "When a tool is slow: what to expect." },
    ]);
    // The owner sees what the tools need; only `ask` (and unknown policies) wait.
    expect(summary.asks).toEqual(["denied: never runs (permission_policy deny)", "mail: automation"]);
    expect(summary.waitingApproval).toEqual(["ask_echo", "legacy"]);
    const detail = await t.request("GET", `/bundles/${echo}`);
    const tools = detail.body.tools as { name: string; policy: string; unavailable?: string }[];
    expect(tools.find((tool) => tool.name === "echo")?.policy).toBe("auto");
    expect(tools.find((tool) => tool.name === "legacy")?.policy).toBe("ask");
    expect(tools.find((tool) => tool.name === "mail")?.unavailable).toMatch(/macOS permission automation/);
  });

  it("builds the payload as the real host: _secrets only once one is set, _context always", async () => {
    const dataDir = mode === "namespaces" ? `/plugin-data/${echo}` : join(t.root, "plugin-data", echo);
    const first = await run("echo", { text: "héllo" });
    expect(first.body.success).toBe(true);
    expect(JSON.parse(first.body.output)).toEqual({
      text: "héllo",
      _context: { working_directory: dataDir },
    });

    const configured = await t.request("POST", "/configure", { name: echo, config: { api_key: "s3cret" } });
    expect(configured.status).toBe(200);
    const second = await run("echo", { text: "again" });
    expect(JSON.parse(second.body.output)).toEqual({
      text: "again",
      _secrets: { api_key: "s3cret" },
      _context: { working_directory: dataDir },
    });
    // The value never comes back on the runner's API.
    expect(JSON.stringify((await t.request("GET", `/bundles/${echo}`)).body)).not.toContain("s3cret");
  });

  it("honours permission_policy: ask waits for approval (one tool), deny never runs, macOS needs are unavailable", async () => {
    const refused = await run("ask_echo", {});
    expect(refused.body.success).toBe(false);
    expect(refused.body.error).toMatch(/needs the owner's approval before tool "ask_echo"/);
    const approved = await t.request("POST", "/approve", { name: echo, tool: "ask_echo" });
    expect(approved.body.approved).toEqual(["ask_echo"]);
    expect((await run("ask_echo", {})).body.success).toBe(true);
    // "allow" is not a policy Osaurus knows: ask, still waiting.
    expect((await run("legacy", {})).body.error).toMatch(/needs the owner's approval/);
    const denied = await run("denied", {});
    expect(denied.body).toEqual({
      success: false,
      error: `Tool "denied" of plugin "${echo}" never runs: its permission policy is "deny".`,
    });
    expect((await t.request("POST", "/approve", { name: echo, tool: "denied" })).status).toBe(400);
    const mail = await run("mail", {});
    expect(mail.body.success).toBe(false);
    expect(mail.body.error).toMatch(
      /needs the macOS permission automation, which this Linux machine cannot grant/,
    );
  });

  it("answers errors the plugin reports, and a NULL answer, as failures", async () => {
    const failed = await run("fail");
    expect(failed.body).toEqual({
      success: false,
      error: '{"ok":false,"kind":"execution_error","message":"it failed"}',
    });
    expect((await run("null")).body).toEqual({ success: false, error: "Plugin returned NULL response" });
  });

  it("serves the v2 host callbacks: log, config_get/config_set (the plugin's settings), secrets; others not supported", async () => {
    const answer = await run("hostcall");
    expect(answer.body.success).toBe(true);
    expect(JSON.parse(answer.body.output)).toEqual({
      before: null,
      after: "hello from the plugin",
      secret: "s3cret",
      http: { error: "not_supported" },
    });
    // The setting is the plugin's own, kept in its data directory across restarts of its host.
    const settings = JSON.parse(
      readFileSync(join(t.root, "plugin-data", echo, "osaurus-settings.json"), "utf8"),
    );
    expect(settings).toEqual({ greeting: "hello from the plugin" });
    expect(JSON.parse((await run("hostcall")).body.output).before).toBe("hello from the plugin");
  });

  it("installs a v1 library (no host API), named from the right of its file name", async () => {
    const installed = await t.request("POST", "/install", { url: `${server.url}/${v1Id}-2.3.1-beta.1.zip` });
    expect(installed.status).toBe(200);
    expect(installed.body.name).toBe(v1);
    const listed = await t.request("GET", "/bundles");
    expect(listed.body.plugins.find((plugin: { name: string }) => plugin.name === v1).version).toBe("1.0.0");
    expect((await run("hostcall", {}, v1)).body).toEqual({
      success: false,
      error: '{"error":"no host API (v1)"}',
    });
  });

  it("kills a slow call at the time limit; the plugin answers again afterwards", async () => {
    const pid = t.host.osaurus.pidOf(echo);
    const slow = await run("slow", { ms: 20_000 });
    expect(slow.body).toEqual({
      success: false,
      error:
        "Tool execution timed out after 3 s: the plugin's process was stopped and is being started again.",
    });
    // Started again for the next call; on a busy machine that start may itself take a while.
    await vi.waitFor(
      async () => {
        const after = await run("echo", { text: "after" });
        expect(after.body.success, JSON.stringify(after.body)).toBe(true);
        expect(JSON.parse(after.body.output).text).toBe("after");
      },
      { timeout: 12_000, interval: 200 },
    );
    expect(t.host.osaurus.pidOf(echo)).not.toBe(pid);
  }, 30_000);

  it.each(["crash", "segfault"])(
    "a %s ends only that plugin's host: the runner and another plugin answer, and so does the plugin once restarted",
    async (tool) => {
      const crashed = await run(tool);
      expect(crashed.body.success, JSON.stringify(crashed.body)).toBe(false);
      expect(crashed.body.error).toMatch(/The plugin's process ended while the tool ran \(it crashed\)/);
      expect(crashed.body.error).toMatch(tool === "crash" ? /SIGABRT/ : /SIGSEGV/);
      expect(JSON.parse((await run("echo", { text: "other" }, v1)).body.output).text).toBe("other");
      expect((await t.request("GET", "/bundles")).status).toBe(200);
      await vi.waitFor(async () => expect((await run("echo", { text: "back" })).body.success).toBe(true), {
        timeout: 10_000,
      });
    },
    20_000,
  );

  it("reads the skills it shipped on demand, frontmatter and all", async () => {
    const skill = await t.request("GET", `/bundles/${echo}/skills/slow-work`);
    expect(skill.status).toBe(200);
    expect(skill.body).toMatchObject({
      name: "slow-work",
      description: "When a tool is slow: what to expect.",
    });
    expect(skill.body.text).toContain("Use the echo tool first.");
    const missing = await t.request("GET", `/bundles/${echo}/skills/nope`);
    expect(missing.status).toBe(404);
    expect(missing.body.error).toContain("its skills: echo-basics, slow-work");
  });

  it("names the plugin after its manifest's plugin_id, not the file's", async () => {
    const installed = await t.request("POST", "/install", { url: `${server.url}/wrong.name-1.0.0.zip` });
    expect(installed.status).toBe(200);
    expect(installed.body.name).toBe(renamed);
    expect(installed.body.message).toContain(`Its manifest's plugin_id names it "${renamed}"`);
    expect((await t.request("GET", "/bundles/wrong-name")).status).toBe(404);
    expect(JSON.parse((await run("echo", { text: "renamed" }, renamed)).body.output).text).toBe("renamed");
  });

  it("refuses a macOS .dylib, a package without a library and a zip whose name breaks the convention", async () => {
    const mac = await t.request("POST", "/install", { url: `${server.url}/test.mac${suffix}-1.0.0.zip` });
    expect(mac.status).toBe(400);
    expect(mac.body.error).toMatch(/libMac.dylib is a macOS library \(Mach-O\).*Linux build/);
    const nolib = await t.request("POST", "/install", { url: `${server.url}/test.nolib${suffix}-1.0.0.zip` });
    expect(nolib.status).toBe(400);
    expect(nolib.body.error).toMatch(/holds no plugin library/);
    const update = await t.request("POST", "/update", { name: echo });
    expect(update.status).toBe(400);
    expect(update.body.error).toMatch(/is an Osaurus package: remove it and install its new/);
    for (const bad of ["badname.zip", `test.badver${suffix}-1.0.zip`]) {
      const refused = await t.request("POST", "/install", { url: `${server.url}/${bad}` });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatch(
        /is not an Osaurus package name: it must be <plugin_id>-<version>.zip/,
      );
    }
    const gone = await t.request("POST", "/install", { url: `${server.url}/test.gone${suffix}-1.0.0.zip` });
    expect(gone.status).toBe(400);
    expect(gone.body.error).toMatch(/could not be downloaded.*not found/);
    // Nothing of the refused packages is left behind.
    const names = (await t.request("GET", "/bundles")).body.plugins.map(
      (plugin: { name: string }) => plugin.name,
    );
    expect(names.sort()).toEqual([echo, renamed, v1].sort());
  });

  it("installs a package the owner uploaded (inline), and refuses one already installed", async () => {
    const data = readFileSync(join(files, `${v1Id}-2.3.1-beta.1.zip`)).toString("base64");
    const again = await t.request("POST", "/install", {
      package: { filename: `${v1Id}-2.3.1-beta.1.zip`, data },
    });
    expect(again.status).toBe(409);
    expect(again.body.error).toBe(`Plugin "${v1}" is already installed.`);
    const garbage = await t.request("POST", "/install", {
      package: {
        filename: `test.garbage${suffix}-1.0.0.zip`,
        data: Buffer.from("not a zip").toString("base64"),
      },
    });
    expect(garbage.status).toBe(400);
    expect(garbage.body.error).toMatch(/not a readable zip file/);
  });

  it("calls destroy and ends the host when the plugin is removed", async () => {
    const pid = t.host.osaurus.pidOf(renamed) as number;
    expect(pid).toBeGreaterThan(0);
    expect((await t.request("POST", "/remove", { name: renamed })).status).toBe(200);
    expect(t.host.osaurus.pidOf(renamed)).toBeUndefined();
    await vi.waitFor(() => expect(alive(pid)).toBe(false), { timeout: 5_000 });
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
