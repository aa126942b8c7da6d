import { execFileSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestRunner } from "./helpers.js";
import { isRoot, startRunner, uniqueName, userExists, writePlugin } from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/** Starts two background children, records every pid, then hangs. */
const FORKER = `#!/bin/sh
cat >/dev/null
sleep 1000 &
echo $! >> "$HOME/pids"
( sleep 1000 ) &
echo $! >> "$HOME/pids"
echo $$ >> "$HOME/pids"
sleep 1000
`;

/** Processes of a group that are still alive (zombies waiting to be reaped count as dead). */
function liveInGroup(pgid: number): string[] {
  let out = "";
  try {
    out = execFileSync("ps", ["-o", "pid=,stat=", "-g", String(pgid)], { encoding: "utf8" });
  } catch {
    return []; // ps exits 1 when nothing matches.
  }
  return out
    .trim()
    .split("\n")
    .filter((line) => line.trim() && !/\sZ/.test(line));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = execFileSync("ps", ["-o", "stat=", "-p", String(pid)], { encoding: "utf8" }).trim();
  return stat !== "" && !stat.startsWith("Z");
}

describe("limits", () => {
  let t: TestRunner;
  const name = uniqueName("limits");

  beforeAll(async () => {
    t = await startRunner({ limits: { syncTimeoutMs: 1_000, killGraceMs: 200 } });
    writePlugin(t.pluginsDir, name, [
      { name: "forker", script: FORKER },
      { name: "flood", script: "#!/bin/sh\nhead -c 52428800 /dev/zero | tr '\\0' 'a'\n" },
      { name: "flood_err", script: "#!/bin/sh\nhead -c 52428800 /dev/zero | tr '\\0' 'e' >&2\nexit 3\n" },
      { name: "quick", script: "#!/bin/sh\necho '{\"ok\": true}'\n" },
      { name: "no_stdin", script: "#!/bin/sh\nexec echo ignored-stdin\n" },
      { name: "silent_fail", script: "#!/bin/sh\nexit 7\n" },
    ]);
  });

  afterAll(async () => {
    await t.close();
    if (isRoot && userExists(pluginUserName(name))) await t.runner.isolation.removeUser(name);
    rmSync(t.root, { recursive: true, force: true });
  });

  it("kills the whole process group of a tool that times out", async () => {
    const started = Date.now();
    const { status, body } = await t.request("POST", `/bundles/${name}/tools/forker/run`, {});
    expect(status).toBe(500);
    expect(body.success).toBe(false);
    expect(body.error).toContain("Tool execution timed out");
    expect(Date.now() - started).toBeLessThan(5_000);

    const pids = readFileSync(join(t.cacheDir, name, "home", "pids"), "utf8")
      .trim()
      .split("\n")
      .map(Number);
    expect(pids).toHaveLength(3);
    const leader = pids[2] as number;
    for (const pid of pids) expect(alive(pid)).toBe(false);
    expect(liveInGroup(leader)).toEqual([]);
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
    expect(status).toBe(500);
    expect(body.error.length).toBeLessThanOrEqual(64 * 1024 + 100);
    expect(body.error).toContain("[output truncated]");
  });

  it("ignores tools that never read stdin, and reports a silent failure's exit code", async () => {
    const ignored = await t.request("POST", `/bundles/${name}/tools/no_stdin/run`, {});
    expect(ignored.body).toEqual({ success: true, output: "ignored-stdin\n" });
    const silent = await t.request("POST", `/bundles/${name}/tools/silent_fail/run`, {});
    expect(silent).toEqual({ status: 500, body: { success: false, error: "Process exited with code 7" } });
  });
});
