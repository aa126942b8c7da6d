import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chownTree } from "@stavrobot/common";
import type { FakeApp, Json, TestCoder } from "./helpers.js";
import {
  LOGIN,
  sandboxModes,
  SECRET,
  isRoot,
  makePlugin,
  messageFor,
  removePluginUser,
  reportOf,
  startCoder,
  startFakeApp,
  uniqueName,
} from "./helpers.js";
import { createHash } from "node:crypto";

const sha = (text: string): string => createHash("sha256").update(text).digest("hex").slice(0, 16);

describe.each(sandboxModes())("coding tasks (%s sandbox)", (mode, plain) => {
  let app: FakeApp;
  let coder: TestCoder;
  const plugins: string[] = [];

  async function plugin(prefix = "code"): Promise<{ name: string; dir: string; owner?: { uid: number } }> {
    const name = uniqueName(prefix);
    plugins.push(name);
    return { name, ...(await makePlugin(coder.pluginsDir, name)) };
  }

  beforeAll(async () => {
    app = await startFakeApp();
    coder = await startCoder({ appUrl: app.url, plain, timeoutMs: 3_000 });
  });

  afterAll(async () => {
    await coder?.close();
    await app?.close();
    for (const name of plugins) await removePluginUser(name);
    rmSync(coder.root, { recursive: true, force: true });
  });

  it("changes the plugin as its own user and posts the agent's answer to the app", async () => {
    const target = await plugin();
    const message = "Add a tool that says hello.\nMake it friendly.";
    const taskId = await coder.submit(target.name, message);
    const posted = await messageFor(app, taskId);

    expect(posted.source).toBe("coder");
    expect(posted.sender).toBe("coder-agent");
    expect(app.authorizations.at(-1)).toBe(`Bearer ${SECRET}`);
    expect(posted.message).toContain(`Coding task ${taskId} for plugin "${target.name}" is done.`);
    expect(posted.message).toContain("Created tool hello.");
    expect(posted.message).toContain(`manage_plugins with action "show" and name "${target.name}"`);
    expect(posted.message).toContain("run_plugin_tool");

    const report: Json = reportOf(posted);
    const root = plain ? target.dir : `/plugins/${target.name}`;
    expect(report.prompt).toBe(message);
    expect(report.cwd).toBe(root);
    expect(report.home).toBe(root);
    expect(report.args).toEqual([
      "-p",
      "--output-format",
      "json",
      "--dangerously-skip-permissions",
      "--append-system-prompt-file",
      report.systemPrompt.path,
      "--no-session-persistence",
      "--model",
      "test-model",
    ]);
    expect(report.systemPrompt).toMatchObject({ readable: true, guideReadable: true });
    if (!plain) expect(report.systemPrompt.path).toBe("/coder/system-prompt.txt");
    // Nothing of the service's environment reaches the agent.
    expect(report.envKeys).not.toContain("STAVROBOT_INTERNAL_SECRET");
    expect(report.envKeys).not.toContain("ANTHROPIC_API_KEY");
    expect(report.apiKey).toEqual({ set: false, length: 0 });
    // The login was lent for the run, to the plugin's user only.
    expect(report.credentials).toMatchObject({ sha: sha(LOGIN), mode: "600" });

    const manifest = join(target.dir, "hello", "manifest.json");
    expect(JSON.parse(readFileSync(manifest, "utf8")).name).toBe("hello");
    expect(readFileSync(join(target.dir, "notes.txt"), "utf8")).toBe("Add a tool that says hello.\n");
    if (isRoot) {
      expect(report.uid).toBe(target.owner?.uid);
      expect(report.credentials.uid).toBe(target.owner?.uid);
      expect(lstatSync(manifest).uid).toBe(target.owner?.uid);
    } else {
      expect(report.uid).toBe(process.getuid?.());
    }
    // …and taken back afterwards; the stored login is unchanged (it was not refreshed).
    expect(existsSync(join(target.dir, ".claude", ".credentials.json"))).toBe(false);
    expect(readFileSync(join(coder.credentialsDir, ".credentials.json"), "utf8")).toBe(LOGIN);
  });

  it.each([
    [
      "@crash",
      /Coding task failed: the Claude Code CLI exited with code 3 without a JSON result[^]*something broke badly/,
    ],
    [
      "@error-json",
      /Coding task failed: the agent stopped after reaching its maximum number of turns: Reached maximum number of turns \(3\)/,
    ],
    [
      "@api-error",
      /Coding task failed: the model's API answered with an error: API Error: 401 invalid x-api-key/,
    ],
    [
      "@not-json",
      /Coding task failed: the Claude Code CLI ended without a JSON result; it printed:\nI changed some files, probably\./,
    ],
    ["@sleep", /Coding task failed: the coding agent did not finish within 3 s and was stopped/],
  ])("turns %s into a failure message", async (marker, expected) => {
    const target = await plugin("fail");
    const taskId = await coder.submit(target.name, `Do it ${marker}`);
    const posted = await messageFor(app, taskId);
    expect(posted.message).toContain(`Coding task ${taskId} for plugin "${target.name}" did not complete.`);
    expect(posted.message).toMatch(expected);
    expect(posted.message).not.toContain("manage_plugins");
    // Whatever happened, the login does not stay behind.
    expect(existsSync(join(target.dir, ".claude", ".credentials.json"))).toBe(false);
  });

  it("runs the tasks of one plugin one after the other, and other plugins alongside", async () => {
    const first = await plugin("serial");
    const other = await plugin("other");
    const ids = [
      await coder.submit(first.name, "one @slow"),
      await coder.submit(first.name, "two @slow"),
      await coder.submit(other.name, "three @slow"),
    ];
    await Promise.all(ids.map((id) => messageFor(app, id)));
    const runs = (dir: string): { started: number; ended: number }[] =>
      readFileSync(join(dir, "fake-runs.jsonl"), "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { started: number; ended: number })
        .sort((a, b) => a.started - b.started);
    const [a, b] = runs(first.dir) as [
      { started: number; ended: number },
      { started: number; ended: number },
    ];
    expect(b.started).toBeGreaterThanOrEqual(a.ended);
    const [c] = runs(other.dir) as [{ started: number; ended: number }];
    expect(c.started).toBeLessThan(a.ended);
    expect(readFileSync(join(first.dir, "notes.txt"), "utf8")).toBe("one @slow\ntwo @slow\n");
  });
});

describe.runIf(isRoot)("a plugin uid this machine has no user for", () => {
  it("runs as that uid and adds a user entry for it", async () => {
    const passwd = () => readFileSync("/etc/passwd", "utf8");
    const used = new Set(
      passwd()
        .split("\n")
        .map((line) => line.split(":")[2]),
    );
    let uid = 42_000;
    while (used.has(String(uid))) uid++;
    const app = await startFakeApp();
    const coder = await startCoder({ appUrl: app.url });
    const name = uniqueName("stranger");
    const dir = join(coder.pluginsDir, name);
    mkdirSync(dir, { mode: 0o700 });
    await chownTree(dir, { uid, gid: uid });
    try {
      const report = reportOf(await messageFor(app, await coder.submit(name, "Hello")));
      expect(report.uid).toBe(uid);
      expect(report.gid).toBe(uid);
      expect(passwd()).toContain(`coder_u${uid}:x:${uid}:`);
    } finally {
      await coder.close();
      await app.close();
      execFileSync("userdel", [`coder_u${uid}`], { stdio: "ignore" });
      rmSync(coder.root, { recursive: true, force: true });
    }
  });
});
