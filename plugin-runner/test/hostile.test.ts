import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@stavrobot/common";
import type { TestPluginHost } from "./helpers.js";
import { isRoot, startPluginHost, uniqueName, userExists, writePlugin } from "./helpers.js";
import { pluginUserName } from "../src/users.js";

let t: TestPluginHost;
const logLines: string[] = [];
const good = uniqueName("good");
const tools = uniqueName("tools");

const OK = "#!/bin/sh\necho '{}'\n";

beforeAll(async () => {
  t = await startPluginHost({ logger: createLogger("test", "warn", (line) => logLines.push(line)) });
  writePlugin(t.pluginsDir, good, [{ name: "ok", script: OK }]);

  // Bundles that must be skipped without breaking the listing.
  const notJson = join(t.pluginsDir, "not-json");
  mkdirSync(notJson);
  writeFileSync(join(notJson, "manifest.json"), "{ this is not json");
  const noDescription = join(t.pluginsDir, "no-description");
  mkdirSync(noDescription);
  writeFileSync(join(noDescription, "manifest.json"), JSON.stringify({ name: "no-description" }));
  writePlugin(t.pluginsDir, "other-name", [], {}, "wrong-dir");
  writePlugin(t.pluginsDir, "Upper", [], {}, "Upper");
  const linked = join(t.pluginsDir, "linked-manifest");
  mkdirSync(linked);
  symlinkSync(join(t.pluginsDir, good, "manifest.json"), join(linked, "manifest.json"));
  symlinkSync(join(t.pluginsDir, good), join(t.pluginsDir, "symlinked-bundle"));

  // One bundle whose tools are a mix of valid and hostile ones.
  const dir = writePlugin(t.pluginsDir, tools, [
    { name: "fine", script: OK },
    { name: "escape_rel", script: OK, manifest: { entrypoint: "../fine/run.sh" } },
    { name: "escape_abs", script: OK, manifest: { entrypoint: "/bin/sh" } },
    { name: "odd_type", script: OK, manifest: { parameters: { x: { type: "object", description: "x" } } } },
    { name: "bad_type", script: OK, manifest: { parameters: { x: { type: 42, description: "x" } } } },
    { name: "no_entry", script: OK, manifest: { entrypoint: undefined } },
    { name: "misnamed", script: OK, manifest: { name: "something_else" } },
    { name: "missing_file", script: OK, manifest: { entrypoint: "nope.sh" } },
    { name: "escape_link", script: OK, manifest: { entrypoint: "link.sh" } },
  ]);
  symlinkSync("/bin/sh", join(dir, "escape_link", "link.sh"));
  writeFileSync(join(dir, "escape_link", "unused"), "");
  symlinkSync(join(dir, "fine"), join(dir, "linked_tool"));
});

afterAll(async () => {
  await t.close();
  for (const name of [good, tools]) {
    if (isRoot && userExists(pluginUserName(name))) await t.host.isolation.removeUser(name);
  }
  rmSync(t.root, { recursive: true, force: true });
});

describe("hostile bundles", () => {
  it("skips malformed bundles and keeps listing the others", async () => {
    const { status, body } = await t.request("GET", "/bundles");
    expect(status).toBe(200);
    const names = body.plugins.map((plugin: { name: string }) => plugin.name).sort();
    expect(names).toEqual([good, tools].sort());
    for (const name of ["not-json", "no-description", "wrong-dir", "linked-manifest", "symlinked-bundle"]) {
      expect((await t.request("GET", `/bundles/${name}`)).status).toBe(404);
    }
    const log = logLines.join("\n");
    expect(log).toContain('plugin "not-json" skipped: manifest.json is not valid JSON');
    expect(log).toMatch(/plugin "no-description" skipped: manifest.json is invalid: description/);
    expect(log).toContain('plugin "wrong-dir" skipped: manifest name "other-name" does not match directory');
    expect(log).toContain('plugin "linked-manifest" skipped:');
    // Each reason is logged once, not on every request.
    await t.request("GET", "/bundles");
    expect(logLines.join("\n").split('plugin "not-json" skipped').length - 1).toBe(1);
  });

  it("keeps only tools whose entrypoint stays inside their directory", async () => {
    const { body } = await t.request("GET", `/bundles/${tools}`);
    // A parameter type the runner does not check is no reason to hide a tool.
    expect(body.tools.map((tool: { name: string }) => tool.name)).toEqual(["fine", "odd_type"]);
    for (const tool of ["escape_rel", "escape_abs", "escape_link", "bad_type", "linked_tool", "misnamed"]) {
      const { status } = await t.request("POST", `/bundles/${tools}/tools/${tool}/run`, {});
      expect(status).toBe(404);
    }
    expect((await t.request("POST", `/bundles/${tools}/tools/fine/run`, {})).status).toBe(200);
    const log = logLines.join("\n");
    expect(log).toContain(
      'tool "escape_rel" skipped: entrypoint "../fine/run.sh" points outside its directory',
    );
    expect(log).toContain(
      'tool "escape_abs" skipped: manifest.json is invalid: entrypoint: must be a relative path',
    );
    expect(log).toContain('tool "escape_link" skipped: entrypoint "link.sh" points outside its directory');
    expect(log).toMatch(/tool "bad_type" skipped: manifest.json is invalid: parameters.x.type/);
    const odd = await t.request("POST", `/bundles/${tools}/tools/odd_type/run`, { x: { any: ["shape"] } });
    expect(odd.body).toMatchObject({ success: true });
  });
});

describe("hostile names", () => {
  const badNames = ["../etc", "..", "Upper", "with space", "a/b", "", "x".repeat(65), "a_b", "ä"];

  it("refuses them for create, update, remove and configure, creating nothing", async () => {
    for (const name of badNames) {
      for (const [path, body] of [
        ["/create", { name, description: "d" }],
        ["/update", { name }],
        ["/remove", { name }],
        ["/configure", { name, config: {} }],
      ] as const) {
        const { status, body: answer } = await t.request("POST", path, body);
        expect(status, `${path} ${name}`).toBe(400);
        expect(answer.error).toMatch(/^Invalid request: name/);
      }
    }
    expect(existsSync(join(t.root, "etc"))).toBe(false);
    expect(readdirSync(t.pluginsDir).sort()).toEqual(
      [
        good,
        tools,
        "not-json",
        "no-description",
        "wrong-dir",
        "Upper",
        "linked-manifest",
        "symlinked-bundle",
      ].sort(),
    );
  });

  it("answers 404 for traversal attempts in URLs", async () => {
    for (const path of [
      "/bundles/..%2F..%2Fetc",
      "/bundles/%2E%2E",
      `/bundles/${good}/tools/..%2F..%2Fok/run`,
    ]) {
      const method = path.endsWith("/run") ? "POST" : "GET";
      expect((await t.request(method, path, method === "POST" ? {} : undefined)).status).toBe(404);
    }
  });

  it("refuses malformed request bodies", async () => {
    expect((await t.request("POST", "/create", "not json")).status).toBe(400);
    expect((await t.request("POST", "/create", { name: "ok-name" })).status).toBe(400);
    expect((await t.request("POST", "/create", { name: "ok-name", description: "d", extra: 1 })).status).toBe(
      400,
    );
    expect((await t.request("POST", "/configure", { name: good, config: "a=b" })).status).toBe(400);
    expect((await t.request("POST", `/bundles/${good}/tools/ok/run`, [1, 2])).status).toBe(400);
    expect(existsSync(join(t.pluginsDir, "ok-name"))).toBe(false);
  });
});

describe("hostile install URLs", () => {
  it("refuses other schemes and option-looking URLs before running git", async () => {
    const marker = join(t.root, "pwned");
    const urls = [
      `file://${t.pluginsDir}/${good}`,
      `ext::sh -c touch% ${marker}`,
      `ext::sh -c "touch ${marker}"`,
      "--upload-pack=touch /tmp/pwned",
      "-u touch",
      t.pluginsDir,
      "ftp://example.com/repo.git",
      "https://example.com/repo.git --upload-pack=touch",
      "https://example.com/\nrepo",
    ];
    for (const url of urls) {
      const { status, body } = await t.request("POST", "/install", { url });
      expect(status, url).toBe(400);
      expect(body.error).toMatch(/^Unsupported repository URL/);
    }
    expect(existsSync(marker)).toBe(false);
    expect(readdirSync(t.pluginsDir).filter((entry) => entry.startsWith("."))).toEqual([]);
  });
});
