import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "@stavrobot/common";
import { isRoot, makeTempRoot, startPluginHost, uniqueName, writePlugin } from "./helpers.js";

describe("without isolation (local development)", () => {
  const root = makeTempRoot("plugin-runner-local");
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("warns once at start-up and runs tools as the current user", async () => {
    const lines: string[] = [];
    const t = await startPluginHost({
      root: join(root, "default"),
      logger: createLogger("test", "info", (line) => lines.push(line)),
      isolation: false,
    });
    const name = uniqueName("local");
    writePlugin(t.pluginsDir, name, [{ name: "who", script: "#!/bin/sh\nid -u\n" }]);
    const answer = await t.host.deps.tools.run(name, "who", {});
    await t.close();
    expect(answer).toEqual({ kind: "done", outcome: { success: true, output: process.getuid?.() } });
    const warnings = lines.filter((line) => line.includes("Per-plugin users are OFF"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(" WARN ");
  });

  it("without bubblewrap or util-linux unshare, falls back to the plain sandbox, says why once and in /health, and still runs tools", async () => {
    const lines: string[] = [];
    const t = await startPluginHost({
      root: join(root, "no-bwrap"),
      logger: createLogger("test", "info", (line) => lines.push(line)),
      plainSandbox: true,
    });
    const name = uniqueName("no-bwrap");
    writePlugin(t.pluginsDir, name, [
      { name: "write", script: `#!/bin/sh\ncat >/dev/null\necho made > /tmp/${name}/out.txt\necho ok\n` },
    ]);
    const health = (await (await fetch(`${t.url}/health`)).json()) as { sandbox: unknown };
    const answer = await t.host.deps.tools.run(name, "write", {});
    // Its user is this machine's, not the test's.
    await t.host.isolation.removeUser(name);
    await t.close();
    const reason = isRoot
      ? "bubblewrap is not installed, and unshare, sh, mount, umount, pivot_root, cp, mkdir (util-linux, coreutils) were not found"
      : "bubblewrap is not installed, and without root util-linux unshare cannot either";
    expect(health.sandbox).toMatchObject({ mode: "plain", users: isRoot, reason });
    expect((health.sandbox as { unprotected: string[] }).unprotected).toContain(
      "a run meant to have no network still has it",
    );
    // The tool's /tmp/<plugin> output comes back as in the namespaces mode.
    expect(answer).toEqual({
      kind: "done",
      outcome: {
        success: true,
        output: "ok\n",
        files: [{ filename: "out.txt", data: Buffer.from("made\n").toString("base64") }],
      },
    });
    const warnings = lines.filter((line) => line.includes(`Sandbox: plain mode (${reason})`));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(" WARN ");
  });

  it("in the plain sandbox, warns once that what a run leaves running cannot be swept", async () => {
    const lines: string[] = [];
    const t = await startPluginHost({
      root: join(root, "timeout"),
      logger: createLogger("test", "info", (line) => lines.push(line)),
      isolation: false,
      plainSandbox: true,
      limits: { syncTimeoutMs: 300, killGraceMs: 100 },
    });
    const name = uniqueName("local-timeout");
    writePlugin(t.pluginsDir, name, [{ name: "hang", script: "#!/bin/sh\ncat >/dev/null\nsleep 30\n" }]);
    for (let run = 0; run < 2; run++) {
      const answer = await t.host.deps.tools.run(name, "hang", {});
      expect(answer).toMatchObject({ kind: "done", outcome: { success: false } });
    }
    await t.close();
    const warnings = lines.filter((line) => line.includes("cannot be told from others and may keep running"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(" WARN ");
  });
});
