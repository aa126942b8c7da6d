import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentToolResult } from "@mariozechner/pi-agent-core";
import { createServiceClient } from "@stavrobot/common";
import type { ServiceClient } from "@stavrobot/common";
import { freePort } from "@stavrobot/common/test-support";
import { createRequestCodingTaskTool } from "../src/tools/request-coding-task.js";
// The real plugin-runner (its buildServer on port 0) and the real coder service (with a fake CLI).
import type { FakeApp, TestPluginHost } from "../../plugin-runner/test/helpers.js";
import {
  SECRET,
  isRoot,
  startFakeApp,
  startPluginHost,
  uniqueName,
} from "../../plugin-runner/test/helpers.js";
import type { TestCoder } from "../../coder/test/helpers.js";
import { SECRET as CODER_SECRET, messageFor, startCoder } from "../../coder/test/helpers.js";

let app: FakeApp;
let pluginHost: TestPluginHost;
let coder: TestCoder;
let runnerClient: ServiceClient;
let coderClient: ServiceClient;
const plugins: string[] = [];

function text(result: AgentToolResult<unknown>): string {
  return result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

async function request(plugin: string, message = "Add a tool that says hello.", coderUsed = coderClient) {
  const tool = createRequestCodingTaskTool({ coder: coderUsed, pluginRunner: runnerClient });
  return text(await tool.execute("call", { plugin, message }));
}

async function createPlugin(prefix: string): Promise<string> {
  const name = uniqueName(prefix);
  plugins.push(name);
  const created = await pluginHost.request("POST", "/create", { name, description: `The ${name} plugin` });
  expect(created.status).toBe(201);
  return name;
}

beforeAll(async () => {
  app = await startFakeApp();
  pluginHost = await startPluginHost();
  coder = await startCoder({ appUrl: app.url, pluginsDir: pluginHost.pluginsDir });
  runnerClient = createServiceClient({ baseUrl: pluginHost.url, bearer: SECRET, retries: 0 });
  coderClient = createServiceClient({ baseUrl: coder.url, bearer: CODER_SECRET, retries: 0 });
});

afterAll(async () => {
  await coder?.close();
  await pluginHost?.close();
  await app?.close();
  if (isRoot) for (const name of plugins) await pluginHost.host.isolation.removeUser(name);
  rmSync(coder.root, { recursive: true, force: true });
  rmSync(pluginHost.root, { recursive: true, force: true });
});

describe("request_coding_task against a real coder and plugin-runner", () => {
  it("submits a task for an editable plugin; the agent's tools then show up in the runner", async () => {
    const plugin = await createPlugin("editable");
    const answer = await request(plugin);
    const match = new RegExp(
      `^Coding task ([0-9a-f-]{36}) submitted for plugin '${plugin}'\\. The result will arrive as a message when it is done\\.$`,
    ).exec(answer);
    expect(match).not.toBeNull();
    const posted = await messageFor(app, match?.[1] as string);
    expect(posted.message).toContain(`for plugin "${plugin}" is done.`);
    const detail = await pluginHost.request("GET", `/bundles/${plugin}`);
    expect(detail.body.tools.map((tool: { name: string }) => tool.name)).toEqual(["hello"]);
    expect(detail.body.editable).toBe(true);
  });

  it("refuses a git-installed plugin", async () => {
    const plugin = await createPlugin("gitted");
    mkdirSync(join(pluginHost.pluginsDir, plugin, ".git"));
    await expect(request(plugin)).rejects.toThrow(
      `Plugin '${plugin}' was installed from git, so it cannot be edited.`,
    );
  });

  it("says an unknown, disabled or invalid plugin is not found", async () => {
    await expect(request("no-such-plugin")).rejects.toThrow("Plugin 'no-such-plugin' not found.");
    await expect(request("Not/A/Name")).rejects.toThrow("Plugin 'Not/A/Name' not found.");
    const disabled = await createPlugin("disabled");
    const configured = await pluginHost.request("POST", "/configure", {
      name: disabled,
      config: { permissions: [] },
    });
    expect(configured.status).toBe(200);
    await expect(request(disabled)).rejects.toThrow(`Plugin '${disabled}' not found.`);
  });

  it("explains how to enable the coder when it is not running", async () => {
    const plugin = await createPlugin("nocoder");
    const down = createServiceClient({
      baseUrl: `http://127.0.0.1:${await freePort()}`,
      bearer: CODER_SECRET,
    });
    await expect(request(plugin, "Add a tool", down)).rejects.toThrow(
      /The coder service is not running[^]*\[coder\] section to config\.toml/,
    );
  });

  it("relays the coder's own refusal", async () => {
    const plugin = await createPlugin("refused");
    const wrong = createServiceClient({
      baseUrl: coder.url,
      bearer: "not-the-secret-0123456789",
      retries: 0,
    });
    await expect(request(plugin, "Add a tool", wrong)).rejects.toThrow(
      "The coder refused the task: Unauthorized",
    );
  });
});
