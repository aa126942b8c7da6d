import { execFileSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeApp, TestRunner } from "./helpers.js";
import {
  isRoot,
  startFakeApp,
  startRunner,
  uniqueName,
  userExists,
  waitFor,
  writePlugin,
} from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/** Leaves its process group and session (setsid), records the escaped pid, then hangs past the timeout. */
const ESCAPER = `#!/bin/sh
cat >/dev/null
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! > "$HOME/escaped"
sleep 1000
`;

/** Processes of a user that are still alive (zombies waiting to be reaped count as dead). */
function liveProcesses(user: string): string[] {
  let out = "";
  try {
    out = execFileSync("ps", ["-o", "pid=,stat=,args=", "-u", user], { encoding: "utf8" });
  } catch {
    return []; // ps exits 1 when nothing matches.
  }
  return out
    .trim()
    .split("\n")
    .filter((line) => line.trim() && !/^\s*\d+\s+Z/.test(line));
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

describe.skipIf(!isRoot)("timeouts under isolation (root)", () => {
  let t: TestRunner;
  let app: FakeApp;
  const name = uniqueName("sweep");
  const user = pluginUserName(name);
  const escapedPid = (): number => Number(readFileSync(join(t.cacheDir, name, "home", "escaped"), "utf8"));

  beforeAll(async () => {
    app = await startFakeApp();
    t = await startRunner({
      appUrl: app.url,
      limits: { syncTimeoutMs: 800, asyncTimeoutMs: 10_000, killGraceMs: 200 },
    });
    writePlugin(t.pluginsDir, name, [
      { name: "escaper", script: ESCAPER },
      {
        name: "healthy",
        script: "#!/bin/sh\ncat >/dev/null\nsleep 2.5\necho '{\"healthy\": true}'\n",
        manifest: { async: true },
      },
    ]);
  });

  afterAll(async () => {
    await t.close();
    await app.close();
    if (userExists(user)) {
      await t.runner.isolation.killProcesses(name);
      await t.runner.isolation.removeUser(name);
    }
    rmSync(t.root, { recursive: true, force: true });
  });

  it("kills a process that left the tool's process group when the tool times out", async () => {
    const { status, body } = await t.request("POST", `/bundles/${name}/tools/escaper/run`, {});
    expect(status).toBe(500);
    expect(body.error).toContain("Tool execution timed out");
    const pid = escapedPid();
    expect(pid).toBeGreaterThan(0);
    await t.runner.settle();
    expect(alive(pid)).toBe(false);
    expect(liveProcesses(user)).toEqual([]);
  });

  it("does not kill a concurrent, healthy run of the same plugin; sweeps once it is done", async () => {
    const started = await t.request("POST", `/bundles/${name}/tools/healthy/run`, {});
    expect(started.status).toBe(202);
    const timedOut = await t.request("POST", `/bundles/${name}/tools/escaper/run`, {});
    expect(timedOut.body.error).toContain("Tool execution timed out");
    const pid = escapedPid();
    // The healthy run is still going, so the sweep waits for it.
    await t.runner.settle();
    expect(alive(pid)).toBe(true);

    await waitFor(() => app.messages.length === 1, 10_000, "the healthy run's result");
    expect(app.messages[0]?.message).toBe(
      `The run of tool "healthy" (plugin "${name}") returned:\n\`\`\`\n${JSON.stringify({ healthy: true }, null, 2)}\n\`\`\``,
    );
    await t.runner.background.idle();
    await t.runner.settle();
    expect(alive(pid)).toBe(false);
    expect(liveProcesses(user)).toEqual([]);
  });
});
