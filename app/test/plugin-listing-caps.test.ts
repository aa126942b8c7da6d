import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
// The real plugin-runner (its buildServer on port 0) and its helpers.
import type { TestPluginHost } from "../../plugin-runner/test/helpers.js";
import { SECRET, startPluginHost, uniqueName, writePlugin } from "../../plugin-runner/test/helpers.js";
import { chat, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";

/**
 * A large plugin directory must not crowd the model's context: the prompt lists at most 50
 * plugins with descriptions of at most 200 characters, and `manage_plugins show` is cut at 20 KB.
 * Through POST /chat with the fake LLM, against the real plugin-runner.
 */
const PLUGINS = 60;
const prefix = uniqueName("cap");
const pluginName = (i: number) => `${prefix}-${String(i).padStart(2, "0")}`;
const wide = `${prefix}-wide`;
const TOOLS = 200;

let fake: FakeLlmServer;
let runner: TestPluginHost;
let env: TestEnv;
let app: RunningApp;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  // Nothing here runs a tool, so no per-plugin users are needed.
  runner = await startPluginHost({ isolation: false });
  for (let i = 0; i < PLUGINS; i++) {
    // 300 characters over several lines; what lies past the first 200 must not reach the prompt.
    const description = `Plugin ${i} line one.\n  ${"x".repeat(170)}\n${"y".repeat(100)} TAIL-${i}`;
    writePlugin(runner.pluginsDir, pluginName(i), [], { description });
  }
  writePlugin(
    runner.pluginsDir,
    wide,
    Array.from({ length: TOOLS }, (_, i) => ({
      name: `tool_${String(i).padStart(3, "0")}`,
      script: "#!/bin/sh\necho ok\n",
      manifest: {
        description: `Tool ${i}: ${"does something useful with the data it is given. ".repeat(3)}`,
        parameters: { input: { type: "string", description: "What to work on." } },
      },
    })),
    { description: "A plugin with very many tools" },
  );
  env = await createTestEnv(configFor(fake));
  app = await startApp({
    env: { ...env.env, PLUGIN_RUNNER_URL: runner.url, STAVROBOT_INTERNAL_SECRET: SECRET },
    logger: silentLogger,
  });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await runner?.close();
  if (runner) rmSync(runner.root, { recursive: true, force: true });
  await fake?.close();
  await env?.cleanup();
});

describe("plugin listings given to the model", () => {
  it("lists at most 50 plugins in the system prompt, each description one line of at most 200 characters", async () => {
    fake.enqueue(textTurn("hi"));
    const before = fake.requests.length;
    await chat(app, "hello");
    const system = (fake.requests[before]?.body.system as { text: string }[])
      .map((block) => block.text)
      .join("\n");
    const block = system.slice(system.indexOf("Available plugins:\n"));
    const lines = block.split("\n\n")[0]!.split("\n").slice(1);
    expect(lines).toHaveLength(51);
    for (let i = 0; i < 50; i++) {
      const line = lines[i]!;
      const description = line.slice(`- ${pluginName(i)}: `.length);
      expect(line.startsWith(`- ${pluginName(i)}: Plugin ${i} line one. xxx`)).toBe(true);
      expect(description.length).toBeLessThanOrEqual(200);
      expect(description.endsWith("…")).toBe(true);
    }
    expect(lines[50]).toBe(`- …and ${PLUGINS + 1 - 50} more (manage_plugins list shows them all)`);
    expect(block).not.toContain("TAIL-");
    expect(block).not.toContain(pluginName(50));
  });

  it("cuts manage_plugins show of a plugin with very many tools at 20 KB, saying so", async () => {
    fake.enqueue(toolTurn("manage_plugins", { action: "show", name: wide }), textTurn("That is a lot."));
    const before = fake.requests.length;
    expect((await chat(app, `what can ${wide} do?`)).status).toBe(200);
    const shown = fake.requests[before + 1]?.lastUserText ?? "";
    const [body, note] = shown.split("\n[TRUNCATED: ");
    expect(Buffer.byteLength(body!)).toBeLessThanOrEqual(20 * 1024);
    expect(note).toMatch(/^the result was \d+ bytes; only the first 20480 bytes \(\d+ lines\) are shown\./);
    expect(note).toContain("The plugin has more tools than can be shown.");
    expect(Number(/^the result was (\d+) bytes/.exec(note!)?.[1])).toBeGreaterThan(20 * 1024);
    expect(body).toContain("tool_000");
    expect(body).not.toContain(`tool_${TOOLS - 1}`);
  });
});
