import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPluginHost } from "./helpers.js";
import { isRoot, startPluginHost, uniqueName, userExists, writePlugin } from "./helpers.js";
import { pluginUserName } from "../src/users.js";

let t: TestPluginHost;
const echo = uniqueName("api-echo");
const cfg = uniqueName("api-cfg");
const created = uniqueName("api-new");

const ECHO_SCRIPT = `#!/bin/sh
input=$(cat)
printf '{"received": %s}' "$input"
`;

beforeAll(async () => {
  t = await startPluginHost();
  writePlugin(t.pluginsDir, echo, [
    {
      name: "echo",
      script: ECHO_SCRIPT,
      manifest: {
        parameters: {
          text: { type: "string", description: "Text" },
          count: { type: "integer", description: "Count" },
          ratio: { type: "number", description: "Ratio" },
          loud: { type: "boolean", description: "Loud" },
        },
      },
    },
    { name: "plain", script: "#!/bin/sh\necho 'just text'\n" },
    { name: "fails", script: "#!/bin/sh\necho 'partial output'\necho 'it broke' >&2\nexit 1\n" },
    {
      name: "files",
      script: `#!/usr/bin/env python3
import json, os, sys
params = json.load(sys.stdin)
with open(params["doc"], "rb") as f:
    data = f.read()
out = os.path.dirname(params["doc"])
with open(os.path.join(out, "upper.txt"), "wb") as f:
    f.write(data.upper())
os.symlink("/etc/passwd", os.path.join(out, "leak.txt"))
print(json.dumps({"path": params["doc"], "size": len(data)}))
`,
      entrypoint: "run.py",
      manifest: { parameters: { doc: { type: "file", description: "A document" } } },
    },
  ]);
  writePlugin(t.pluginsDir, cfg, [{ name: "show", script: "#!/bin/sh\ncat ../config.json\n" }], {
    instructions: "x".repeat(6000),
    config: {
      api_key: { description: "The API key", required: true },
      region: { description: "Region", required: false, default: "eu" },
    },
  });
});

afterAll(async () => {
  await t.close();
  for (const name of [echo, cfg, created]) {
    if (isRoot && userExists(pluginUserName(name))) await t.host.isolation.removeUser(name);
  }
  rmSync(t.root, { recursive: true, force: true });
});

describe("auth and health", () => {
  it("answers /health without auth", async () => {
    const response = await fetch(`${t.url}/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      status: "ok",
      sandbox: t.host.sandbox.status,
      network: { enforced: t.host.sandbox.mode === "namespaces", allowWithoutCut: false },
    });
  });

  it("refuses requests without the right bearer", async () => {
    expect((await fetch(`${t.url}/bundles`)).status).toBe(401);
    const wrong = await t.request("GET", "/bundles", undefined, "wrong-secret-wrong-secret");
    expect(wrong).toEqual({ status: 401, body: { error: "Unauthorized" } });
  });
});

describe("bundles", () => {
  it("lists bundles with editable flags", async () => {
    const { status, body } = await t.request("GET", "/bundles");
    expect(status).toBe(200);
    expect(body.plugins).toContainEqual({
      name: echo,
      description: `The ${echo} plugin`,
      editable: true,
      permissions: ["*"],
      format: "stavrobot",
      asks: [],
      network: true,
      networkAllowed: true,
    });
  });

  it("shows tools, truncated instructions and config presence but never values", async () => {
    writeFileSync(
      join(t.pluginsDir, cfg, "config.json"),
      JSON.stringify({ api_key: "sk-very-secret-value" }),
    );
    const { status, body } = await t.request("GET", `/bundles/${cfg}`);
    expect(status).toBe(200);
    expect(body.tools).toEqual([
      { name: "show", description: "The show tool", async: false, parameters: {} },
    ]);
    expect(body.instructions.length).toBeLessThan(5100);
    expect(body.instructions).toContain("[Instructions truncated]");
    expect(body.config).toEqual({
      api_key: { description: "The API key", required: true, configured: true },
      region: { description: "Region", required: false, configured: false },
    });
    expect(JSON.stringify(body)).not.toContain("sk-very-secret-value");
    expect(body).not.toHaveProperty("entrypoint");
  });

  it("reports on the config route which keys are set, never their values", async () => {
    const { body } = await t.request("GET", `/bundles/${cfg}/config`);
    expect(body).toEqual({
      schema: {
        api_key: { description: "The API key", required: true },
        region: { description: "Region", required: false, default: "eu" },
      },
      configured: { api_key: true, region: false },
      permissions: ["*"],
    });
    expect(JSON.stringify(body)).not.toContain("sk-very-secret-value");
  });

  it("answers 404 for unknown bundles", async () => {
    expect(await t.request("GET", "/bundles/nope")).toEqual({
      status: 404,
      body: { error: "Bundle not found" },
    });
  });
});

describe("running tools", () => {
  it("passes parameters on stdin and parses JSON output", async () => {
    const params = { text: "hi", count: 3, ratio: 0.5, loud: true };
    const { status, body } = await t.request("POST", `/bundles/${echo}/tools/echo/run`, params);
    expect(status).toBe(200);
    expect(body.success).toBe(true);
    // Exactly what was passed: nothing the tool did not declare.
    expect(body.output.received).toEqual(params);
  });

  it("returns raw text when stdout is not JSON, and accepts an empty body", async () => {
    const response = await fetch(`${t.url}/bundles/${echo}/tools/plain/run`, {
      method: "POST",
      headers: { Authorization: "Bearer test-internal-secret-0123456789" },
    });
    expect(await response.json()).toEqual({ success: true, output: "just text\n" });
  });

  it("answers a tool that exits non-zero with its stderr and stdout (an ordinary outcome, not a 500)", async () => {
    const { status, body } = await t.request("POST", `/bundles/${echo}/tools/fails/run`, {});
    expect(status).toBe(200);
    expect(body).toEqual({ success: false, error: "it broke\npartial output" });
  });

  it("names the available tools when one is missing", async () => {
    const { status, body } = await t.request("POST", `/bundles/${echo}/tools/nope/run`, {});
    expect(status).toBe(404);
    expect(body.error).toBe(
      "Tool not found. Available tools: echo (text: string, count: integer, ratio: number, loud: boolean), fails, files (doc: file), plain",
    );
  });

  it("refuses unknown parameters and wrong types", async () => {
    const unknown = await t.request("POST", `/bundles/${echo}/tools/echo/run`, { k: 1 });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toBe(
      'Unknown parameter: "k". Parameters of this tool: text (string), count (integer), ratio (number), loud (boolean)',
    );
    expect(unknown.body.parameters.text.type).toBe("string");
    for (const [key, value, type] of [
      ["count", 1.5, "integer"],
      ["count", "3", "integer"],
      ["ratio", "x", "number"],
      ["loud", "yes", "boolean"],
      ["text", 5, "string"],
    ] as const) {
      const { status, body } = await t.request("POST", `/bundles/${echo}/tools/echo/run`, { [key]: value });
      expect(status).toBe(400);
      expect(body.error).toBe(`Parameter "${key}" must be of type "${type}"`);
    }
    const notJson = await t.request("POST", `/bundles/${echo}/tools/echo/run`, "{nope");
    expect(notJson.status).toBe(400);
    expect(notJson.body.error).toMatch(/^Invalid JSON/);
  });

  it("hands file parameters over as paths and returns output files, never symlinks", async () => {
    const data = Buffer.from("hello file").toString("base64");
    const { status, body } = await t.request("POST", `/bundles/${echo}/tools/files/run`, {
      doc: { filename: "note.txt", data },
    });
    expect(status).toBe(200);
    expect(body.output.size).toBe(10);
    expect(body.output.path).toBe(`/tmp/${echo}/note.txt`);
    expect(body.files).toEqual([
      { filename: "upper.txt", data: Buffer.from("HELLO FILE").toString("base64") },
    ]);
    // The run's directory is removed after the answer, and nothing else is left in the runs dir.
    await t.host.settle();
    expect(readdirSync(t.runsDir)).toEqual([]);
    expect(existsSync(`/tmp/${echo}`)).toBe(false);
  });

  it("refuses file parameters with unsafe names or shapes", async () => {
    const data = Buffer.from("x").toString("base64");
    for (const doc of [
      { filename: "../x", data },
      { filename: "..", data },
      { filename: "a", data: "%%%" },
      "path",
    ]) {
      const { status } = await t.request("POST", `/bundles/${echo}/tools/files/run`, { doc });
      expect(status).toBe(400);
    }
  });
});

describe("create and configure", () => {
  it("creates an editable plugin and refuses duplicates", async () => {
    const first = await t.request("POST", "/create", { name: created, description: "Fresh" });
    expect(first).toEqual({ status: 201, body: { message: `Plugin '${created}' created successfully.` } });
    const manifest = JSON.parse(readFileSync(join(t.pluginsDir, created, "manifest.json"), "utf8"));
    expect(manifest).toEqual({ name: created, description: "Fresh" });
    const again = await t.request("POST", "/create", { name: created, description: "Again" });
    expect(again.status).toBe(409);
    const shown = await t.request("GET", `/bundles/${created}`);
    expect(shown.body).toMatchObject({ name: created, editable: true, tools: [] });
  });

  it("configures declared keys, warns about missing required ones and never echoes values", async () => {
    rmSync(join(t.pluginsDir, cfg, "config.json"), { force: true });
    const partial = await t.request("POST", "/configure", { name: cfg, config: { region: "us" } });
    expect(partial.status).toBe(200);
    expect(partial.body.warnings).toEqual(["Missing required config key: api_key (The API key)"]);
    const full = await t.request("POST", "/configure", {
      name: cfg,
      config: { api_key: "sk-top-secret-42" },
    });
    expect(full.body).toEqual({
      message: `Configuration of plugin "${cfg}" updated: api_key.`,
      warnings: [],
    });
    expect(JSON.stringify(full.body)).not.toContain("sk-top-secret-42");
    const run = await t.request("POST", `/bundles/${cfg}/tools/show/run`, {});
    // The runner keeps a copy of the permissions there, as the reference does.
    expect(run.body.output).toEqual({ region: "us", api_key: "sk-top-secret-42", permissions: ["*"] });
  });

  it("refuses unknown keys and plugins without config", async () => {
    const unknown = await t.request("POST", "/configure", { name: cfg, config: { b: 1, a: 2 } });
    expect(unknown).toEqual({
      status: 400,
      body: { error: 'Unknown config keys: "b", "a"', kind: "invalid" },
    });
    const none = await t.request("POST", "/configure", { name: echo, config: { a: 1 } });
    expect(none).toEqual({
      status: 400,
      body: { error: "Plugin does not accept configuration.", kind: "invalid" },
    });
    const missing = await t.request("POST", "/configure", { name: "does-not-exist", config: {} });
    expect(missing.status).toBe(404);
  });
});

describe("permissions and the manifest cache", () => {
  it("refuses a disabled plugin and a tool the owner did not permit", async () => {
    const set = (permissions: string[]) =>
      t.request("POST", "/configure", { name: echo, config: { permissions } });
    expect((await set(["plain"])).status).toBe(200);
    expect(await t.request("POST", `/bundles/${echo}/tools/fails/run`, {})).toEqual({
      status: 403,
      body: { error: "Tool not permitted", kind: "forbidden", reason: "tool-not-permitted" },
    });
    expect((await t.request("POST", `/bundles/${echo}/tools/plain/run`, {})).status).toBe(200);
    expect((await t.request("GET", `/bundles/${echo}`)).body.permissions).toEqual(["plain"]);
    await set([]);
    expect(await t.request("POST", `/bundles/${echo}/tools/plain/run`, {})).toEqual({
      status: 403,
      body: { error: "Plugin is disabled", kind: "forbidden", reason: "plugin-disabled" },
    });
    // A plugin rewriting its own config.json cannot lift the owner's choice.
    writeFileSync(join(t.pluginsDir, echo, "config.json"), JSON.stringify({ permissions: ["*"] }));
    expect((await t.request("POST", `/bundles/${echo}/tools/plain/run`, {})).status).toBe(403);
    expect((await set(["nope", 1] as unknown as string[])).status).toBe(400);
    await set(["*"]);
    expect((await t.request("POST", `/bundles/${echo}/tools/plain/run`, {})).status).toBe(200);
  });

  it("sees a plugin changed on disk at its next use", async () => {
    const dir = join(t.pluginsDir, echo);
    const before = await t.request("GET", `/bundles/${echo}`);
    const manifest = JSON.parse(readFileSync(join(dir, "plain", "manifest.json"), "utf8"));
    writeFileSync(
      join(dir, "plain", "manifest.json"),
      JSON.stringify({ ...manifest, description: "Edited" }),
    );
    const edited = await t.request("GET", `/bundles/${echo}`);
    expect(edited.body.tools.find((tool: { name: string }) => tool.name === "plain").description).toBe(
      "Edited",
    );
    writePlugin(t.pluginsDir, echo, [{ name: "added", script: "#!/bin/sh\necho added\n" }]);
    const added = await t.request("POST", `/bundles/${echo}/tools/added/run`, {});
    expect(added.body).toEqual({ success: true, output: "added\n" });
    expect(before.body.tools).toHaveLength(4);
  });
});
