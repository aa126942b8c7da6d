import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processesMatching } from "@stavrobot/common/test-support";
import type { TestPluginHost } from "./helpers.js";
import { sandboxModes, isRoot, startPluginHost, uniqueName, userExists, writePlugin } from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/** Starts two background children carrying a marker in their command line, then hangs. */
const forker = (marker: string) => `#!/bin/bash
cat >/dev/null
(exec -a ${marker}-child sleep 1000) &
( (exec -a ${marker}-grandchild sleep 1000) ) &
exec -a ${marker}-main sleep 1000
`;

describe.each(sandboxModes())("limits (%s sandbox)", (_mode, plainSandbox) => {
  let t: TestPluginHost;
  const name = uniqueName("limits");
  const marker = `stavrobot-limits-${name}`;

  beforeAll(async () => {
    t = await startPluginHost({ plainSandbox, limits: { syncTimeoutMs: 1_000, killGraceMs: 200 } });
    writePlugin(t.pluginsDir, name, [
      { name: "forker", script: forker(marker) },
      { name: "flood", script: "#!/bin/sh\nhead -c 52428800 /dev/zero | tr '\\0' 'a'\n" },
      { name: "flood_err", script: "#!/bin/sh\nhead -c 52428800 /dev/zero | tr '\\0' 'e' >&2\nexit 3\n" },
      { name: "quick", script: "#!/bin/sh\necho '{\"ok\": true}'\n" },
      { name: "no_stdin", script: "#!/bin/sh\nexec echo ignored-stdin\n" },
      { name: "silent_fail", script: "#!/bin/sh\nexit 7\n" },
    ]);
  });

  afterAll(async () => {
    await t.close();
    if (isRoot && userExists(pluginUserName(name))) await t.host.isolation.removeUser(name);
    rmSync(t.root, { recursive: true, force: true });
  });

  it("ends the whole process tree of a tool that times out", async () => {
    const started = Date.now();
    const { status, body } = await t.request("POST", `/bundles/${name}/tools/forker/run`, {});
    expect(status).toBe(200);
    expect(body.success).toBe(false);
    expect(body.error).toContain("Tool execution timed out");
    expect(Date.now() - started).toBeLessThan(5_000);
    await t.host.settle();
    expect(processesMatching(marker)).toEqual([]);
  });

  it("cuts off a tool printing 50 MB without hanging, and keeps answering", async () => {
    const response = await fetch(`${t.url}/bundles/${name}/tools/flood/run`, {
      method: "POST",
      headers: { Authorization: "Bearer test-internal-secret-0123456789" },
    });
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(text.length).toBeLessThan(1.2 * 1024 * 1024);
    const body = JSON.parse(text);
    expect(body.output).toContain("[output truncated");
    expect(body.warnings[0]).toMatch(/^Output truncated/);

    const next = await t.request("POST", `/bundles/${name}/tools/quick/run`, {});
    expect(next).toEqual({ status: 200, body: { success: true, output: { ok: true } } });
  });

  it("bounds stderr of a failing tool", async () => {
    const { status, body } = await t.request("POST", `/bundles/${name}/tools/flood_err/run`, {});
    expect(status).toBe(200);
    expect(body.error.length).toBeLessThanOrEqual(64 * 1024 + 100);
    expect(body.error).toContain("[output truncated]");
  });

  it("ignores tools that never read stdin, and reports a silent failure's exit code", async () => {
    const ignored = await t.request("POST", `/bundles/${name}/tools/no_stdin/run`, {});
    expect(ignored.body).toEqual({ success: true, output: "ignored-stdin\n" });
    const silent = await t.request("POST", `/bundles/${name}/tools/silent_fail/run`, {});
    expect(silent).toEqual({ status: 200, body: { success: false, error: "Process exited with code 7" } });
  });
});
