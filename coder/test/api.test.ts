import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { FakeApp, TestCoder } from "./helpers.js";
import {
  makePlugin,
  makeTempRoot,
  messageFor,
  removePluginUser,
  startCoder,
  startFakeApp,
  uniqueName,
} from "./helpers.js";

let app: FakeApp;
let coder: TestCoder;
const plugins: string[] = [];

beforeAll(async () => {
  app = await startFakeApp();
  coder = await startCoder({ appUrl: app.url });
});

afterAll(async () => {
  await coder?.close();
  await app?.close();
  for (const name of plugins) await removePluginUser(name);
  rmSync(coder.root, { recursive: true, force: true });
});

async function plugin() {
  const name = uniqueName("api");
  plugins.push(name);
  return { name, ...(await makePlugin(coder.pluginsDir, name)) };
}

const code = (plugin: string, extra: Record<string, unknown> = {}) =>
  coder.request("POST", "/code", {
    taskId: `task-${uniqueName("t")}`,
    plugin,
    message: "Add a tool",
    ...extra,
  });

describe("POST /code", () => {
  it("answers 202 with the task id", async () => {
    const target = await plugin();
    const taskId = `task-${uniqueName("t")}`;
    const answer = await coder.request("POST", "/code", {
      taskId,
      plugin: target.name,
      message: "Add a tool",
    });
    expect(answer).toEqual({ status: 202, body: { taskId } });
    await messageFor(app, taskId);
  });

  it.each([
    [{ plugin: "Bad_Name" }, "Plugin names may only contain lowercase letters, digits and hyphens"],
    [{ plugin: "../etc" }, "Plugin names may only contain"],
    [{ message: "   " }, "message"],
    [{ taskId: "x" }, "taskId"],
  ])("refuses an invalid request %j (400)", async (extra, error) => {
    const answer = await code("valid-name", extra);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toContain(error);
  });

  it("refuses a plugin that does not exist", async () => {
    const answer = await code("no-such-plugin");
    expect(answer).toEqual({
      status: 400,
      body: { error: 'Plugin "no-such-plugin" does not exist.', kind: "invalid" },
    });
  });

  it("refuses a git-installed plugin: only editable plugins may change", async () => {
    const target = await plugin();
    mkdirSync(join(target.dir, ".git"));
    const answer = await code(target.name);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toContain("was installed from git");
  });

  it("refuses a plugin directory that is a symlink", async () => {
    const real = makeTempRoot("real-plugin");
    const name = uniqueName("linked");
    writeFileSync(join(real, "manifest.json"), JSON.stringify({ name, description: "x" }));
    symlinkSync(real, join(coder.pluginsDir, name));
    const answer = await code(name);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toContain("is a symlink");
    rmSync(real, { recursive: true, force: true });
  });

  it("refuses a task id that is already waiting (409)", async () => {
    const target = await plugin();
    const taskId = `task-${uniqueName("t")}`;
    const first = await coder.request("POST", "/code", { taskId, plugin: target.name, message: "a @slow" });
    const again = await coder.request("POST", "/code", { taskId, plugin: target.name, message: "b" });
    expect(first.status).toBe(202);
    expect(again.status).toBe(409);
    await messageFor(app, taskId);
  });

  it("answers 401 without the internal secret, and keeps /health open", async () => {
    expect((await coder.request("POST", "/code", {}, "wrong-secret-0123456789")).status).toBe(401);
    const health = await fetch(`${coder.url}/health`);
    expect(await health.json()).toMatchObject({ status: "ok", claude: true, auth: "subscription" });
  });
});

describe("delivery", () => {
  it("keeps a result until the app takes it, with one idempotency key", async () => {
    const target = await plugin();
    app.statuses.push(503, 503);
    const taskId = await coder.submit(target.name, "Add a tool");
    const key = `coder:${taskId}`;
    const accepted = () =>
      app.messages.filter((message, index) => message.idempotencyKey === key && app.answered[index] === 202);
    await vi.waitFor(() => expect(accepted()).toHaveLength(1), 10_000);
    const attempts = app.messages.filter((message) => message.idempotencyKey === key);
    expect(attempts.length).toBe(3);
    expect(new Set(attempts.map((message) => message.message)).size).toBe(1);
    // The outbox removes its file once the app's answer arrives: just after the fake recorded it.
    await vi.waitFor(() => expect(existsSync(join(coder.stateDir, "outbox", `${taskId}.json`))).toBe(false));
    expect(readFileSync(join(target.dir, "notes.txt"), "utf8")).toBe("Add a tool\n");
  });
});
