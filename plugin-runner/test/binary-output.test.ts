import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { isStorableText } from "@stavrobot/common";
import type { FakeApp, TestPluginHost } from "./helpers.js";
import { isRoot, startFakeApp, startPluginHost, uniqueName, userExists, writePlugin } from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/*
 * Text the app's database cannot store: U+0000 and unpaired surrogates. A raw NUL byte reaches the
 * runner as it is; a lone surrogate can only arrive spelled out in JSON ("\ud800"), since raw
 * surrogate bytes are not UTF-8 and decode to U+FFFD anyway. Whatever the tool prints, the result
 * must hold U+FFFD in their place, or every later async result would queue behind it.
 */
const RAW_TEXT = `#!/bin/bash\ncat >/dev/null\nprintf 'before\\000middle\\355\\240\\200after'\n`;
const JSON_TEXT = `#!/bin/bash\ncat >/dev/null\nprintf '{"text": "nul\\\\u0000here", "lone": "x\\\\ud800y", "\\\\udc00key": 1}'\n`;
const FAILING = `#!/bin/bash\ncat >/dev/null\nprintf 'broke\\000down' >&2\nexit 4\n`;

/** Every string in a JSON-like value, keys included. */
function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value && typeof value === "object")
    return Object.entries(value).flatMap(([key, item]) => [key, ...strings(item)]);
  return [];
}

describe("tool output the database cannot store", () => {
  let t: TestPluginHost;
  let app: FakeApp;
  const name = uniqueName("binary");

  beforeAll(async () => {
    app = await startFakeApp();
    t = await startPluginHost({ appUrl: app.url });
    writePlugin(t.pluginsDir, name, [
      { name: "raw", script: RAW_TEXT },
      { name: "json", script: JSON_TEXT },
      { name: "failing", script: FAILING },
      { name: "raw_async", script: RAW_TEXT, manifest: { async: true } },
      { name: "json_async", script: JSON_TEXT, manifest: { async: true } },
    ]);
  });

  afterAll(async () => {
    await t?.close();
    await app?.close();
    if (isRoot && userExists(pluginUserName(name))) await t.host.isolation.removeUser(name);
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  it("replaces NUL in a sync tool's text output with U+FFFD", async () => {
    const { status, body } = await t.request("POST", `/bundles/${name}/tools/raw/run`, {});
    expect(status).toBe(200);
    expect(body.success).toBe(true);
    expect(body.output).toMatch(/^before\uFFFDmiddle\uFFFD+after$/);
    expect(isStorableText(body.output)).toBe(true);
  });

  it("replaces NUL and lone surrogates spelled out in a sync tool's JSON, keys included", async () => {
    const { status, body } = await t.request("POST", `/bundles/${name}/tools/json/run`, {});
    expect(status).toBe(200);
    expect(body).toEqual({
      success: true,
      output: { text: "nul\uFFFDhere", lone: "x\uFFFDy", "\uFFFDkey": 1 },
    });
  });

  it("replaces NUL in a failing tool's error text", async () => {
    const { body } = await t.request("POST", `/bundles/${name}/tools/failing/run`, {});
    expect(body).toEqual({ success: false, error: "broke\uFFFDdown" });
  });

  it("delivers async results with U+FFFD in their place", async () => {
    expect((await t.request("POST", `/bundles/${name}/tools/raw_async/run`, {})).status).toBe(202);
    await vi.waitFor(() => expect(app.messages).toHaveLength(1), 10_000);
    expect((await t.request("POST", `/bundles/${name}/tools/json_async/run`, {})).status).toBe(202);
    await vi.waitFor(() => expect(app.messages).toHaveLength(2), 10_000);
    const [raw, json] = app.messages;
    const output = (message: typeof raw) =>
      message?.pluginResult?.outcome.success ? message.pluginResult.outcome.output : undefined;
    expect(output(raw)).toMatch(/before\uFFFDmiddle\uFFFD+after/);
    expect(output(json)).toEqual({ text: "nul\uFFFDhere", lone: "x\uFFFDy", "\uFFFDkey": 1 });
    for (const message of app.messages) expect(strings(message).every(isStorableText)).toBe(true);
    await vi.waitFor(async () => expect(await t.host.outbox.pending()).toEqual([]), 5_000);
  });
});
