import { createHash } from "node:crypto";
import {
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeApp, TestCoder } from "./helpers.js";
import {
  LOGIN,
  isRoot,
  makePlugin,
  makeTempRoot,
  messageFor,
  removePluginUser,
  reportOf,
  startCoder,
  startFakeApp,
  uniqueName,
} from "./helpers.js";

const API_KEY = "sk-ant-test-0123456789abcdef";

let app: FakeApp;
const coders: TestCoder[] = [];
const plugins: string[] = [];

beforeAll(async () => {
  app = await startFakeApp();
});

afterAll(async () => {
  for (const coder of coders) {
    await coder.close();
    rmSync(coder.root, { recursive: true, force: true });
  }
  await app?.close();
  for (const name of plugins) await removePluginUser(name);
});

async function coderWith(env: Record<string, string> = {}): Promise<TestCoder> {
  const coder = await startCoder({ appUrl: app.url, env });
  coders.push(coder);
  return coder;
}

async function pluginOf(coder: TestCoder, prefix = "cred") {
  const name = uniqueName(prefix);
  plugins.push(name);
  return { name, ...(await makePlugin(coder.pluginsDir, name)) };
}

/** Runs one task and returns the message the app got. */
async function task(coder: TestCoder, plugin: string, message = "Write a tool") {
  return messageFor(app, await coder.submit(plugin, message));
}

describe("the lent Claude login", () => {
  it("keeps a login the agent refreshed, and takes it out of the plugin", async () => {
    const coder = await coderWith();
    const target = await pluginOf(coder);
    const posted = await task(coder, target.name, "Refresh @refresh");
    expect(posted.message).toContain("is done");
    const stored = join(coder.credentialsDir, ".credentials.json");
    expect(JSON.parse(readFileSync(stored, "utf8")).claudeAiOauth.accessToken).toBe("refreshed-token");
    expect(lstatSync(stored).mode & 0o777).toBe(0o600);
    expect(existsSync(join(target.dir, ".claude", ".credentials.json"))).toBe(false);
    // The next task gets the refreshed login.
    const next = reportOf(await task(coder, target.name));
    expect(next.credentials.sha).toBe(
      createHash("sha256").update(readFileSync(stored, "utf8")).digest("hex").slice(0, 16),
    );
  });

  it("refuses a symlinked credentials directory", async () => {
    const coder = await coderWith();
    const linked = join(coder.root, "linked-credentials");
    symlinkSync(coder.credentialsDir, linked);
    const other = await coderWith({ CODER_CREDENTIALS_DIR: linked });
    const target = await pluginOf(other);
    const posted = await task(other, target.name);
    expect(posted.message).toMatch(
      /Coding task failed: the Claude login could not be given to the agent: .*is a symlink/,
    );
    expect(existsSync(join(target.dir, "hello"))).toBe(false);
  });

  it("refuses a symlinked .credentials.json in the credentials directory", async () => {
    const coder = await coderWith();
    const stored = join(coder.credentialsDir, ".credentials.json");
    renameSync(stored, join(coder.credentialsDir, "real.json"));
    symlinkSync(join(coder.credentialsDir, "real.json"), stored);
    const target = await pluginOf(coder);
    const posted = await task(coder, target.name);
    expect(posted.message).toMatch(
      /Coding task failed: .*\.credentials\.json is a symlink; the coder refuses to use it/,
    );
  });

  it("says how to log in when there is no login", async () => {
    const coder = await coderWith();
    rmSync(join(coder.credentialsDir, ".credentials.json"));
    const target = await pluginOf(coder);
    const posted = await task(coder, target.name);
    expect(posted.message).toContain(
      "Coding task failed: the Claude login could not be given to the agent: no Claude login found",
    );
    expect(posted.message).toContain("ANTHROPIC_API_KEY");
  });

  it("refuses a plugin whose .claude is a symlink (400), before anything runs", async () => {
    const coder = await coderWith();
    const target = await pluginOf(coder);
    const victim = makeTempRoot("victim");
    symlinkSync(victim, join(target.dir, ".claude"));
    const answer = await coder.request("POST", "/code", {
      taskId: `task-${uniqueName("t")}`,
      plugin: target.name,
      message: "x",
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toContain(".claude directory");
    expect(existsSync(join(victim, ".credentials.json"))).toBe(false);
    rmSync(victim, { recursive: true, force: true });
  });

  it("replaces a planted .credentials.json symlink instead of writing through it", async () => {
    const coder = await coderWith();
    const target = await pluginOf(coder);
    const victim = join(makeTempRoot("victim"), "precious.txt");
    writeFileSync(victim, "precious");
    mkdirSync(join(target.dir, ".claude"), { mode: 0o700 });
    symlinkSync(victim, join(target.dir, ".claude", ".credentials.json"));
    if (target.owner) {
      lchownSync(join(target.dir, ".claude"), target.owner.uid, target.owner.gid);
      lchownSync(join(target.dir, ".claude", ".credentials.json"), target.owner.uid, target.owner.gid);
    }
    const posted = await task(coder, target.name);
    expect(posted.message).toContain("is done");
    expect(readFileSync(victim, "utf8")).toBe("precious");
    expect(existsSync(join(target.dir, ".claude", ".credentials.json"))).toBe(false);
  });

  it("does not follow .claude when the agent swapped it for a symlink during the run", async () => {
    const coder = await coderWith();
    const target = await pluginOf(coder);
    const victimDir = makeTempRoot("victim");
    const victim = join(victimDir, ".credentials.json");
    const foreign = JSON.stringify({
      claudeAiOauth: { accessToken: "not-yours", expiresAt: Date.now() + 9e9 },
    });
    writeFileSync(victim, foreign);
    const posted = await task(coder, target.name, `Swap @swap-claude=${victimDir}`);
    expect(posted.message).toContain("is done");
    expect(posted.message).toContain(
      "The login was not copied back: the plugin's .claude directory is a symlink",
    );
    expect(readFileSync(victim, "utf8")).toBe(foreign);
    expect(readFileSync(join(coder.credentialsDir, ".credentials.json"), "utf8")).toBe(LOGIN);
  });
});

describe("API-key mode", () => {
  it("gives the CLI ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL (without /v1) and lends no login", async () => {
    const coder = await coderWith({
      ANTHROPIC_API_KEY: API_KEY,
      ANTHROPIC_BASE_URL: "http://127.0.0.1:9/v1/",
    });
    const target = await pluginOf(coder, "apikey");
    const posted = await task(coder, target.name);
    const report = reportOf(posted);
    expect(report.apiKey).toEqual({ set: true, length: API_KEY.length });
    expect(report.baseUrl).toBe("http://127.0.0.1:9");
    expect(report.credentials).toBeNull();
    expect(posted.message).not.toContain(API_KEY);
    expect(existsSync(join(target.dir, ".claude", ".credentials.json"))).toBe(false);
  });
});

describe.runIf(isRoot)("as root", () => {
  it("refuses a plugin directory that belongs to root", async () => {
    const coder = await coderWith();
    const dir = join(coder.pluginsDir, uniqueName("rooty"));
    mkdirSync(dir);
    const answer = await coder.request("POST", "/code", {
      taskId: `task-${uniqueName("t")}`,
      plugin: dir.split("/").pop(),
      message: "x",
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toContain("belongs to root");
  });
});
