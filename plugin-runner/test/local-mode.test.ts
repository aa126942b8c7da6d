import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "@stavrobot/common";
import { createRunner } from "../src/runtime.js";
import { makeTempRoot, uniqueName, writePlugin } from "./helpers.js";

describe("without isolation (local development)", () => {
  const root = makeTempRoot("plugin-runner-local");
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("warns once at start-up and runs tools as the current user", async () => {
    const lines: string[] = [];
    const logger = createLogger("test", "info", (line) => lines.push(line));
    const runner = createRunner({
      pluginsDir: join(root, "plugins"),
      cacheDir: join(root, "cache"),
      stateDir: join(root, "state"),
      runsDir: join(root, "runs"),
      appInternalUrl: "http://127.0.0.1:9",
      secret: "local-secret-0123456789",
      logger,
      isolation: false,
    });
    await runner.start();
    const name = uniqueName("local");
    writePlugin(runner.deps.bundles.pluginsDir, name, [{ name: "who", script: "#!/bin/sh\nid -u\n" }]);
    const answer = await runner.deps.tools.run(name, "who", {});
    await runner.stop();
    expect(answer).toEqual({ kind: "done", outcome: { success: true, output: process.getuid?.() } });
    const warnings = lines.filter((line) => line.includes("Plugin isolation is OFF"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(" WARN ");
  });

  it("warns once that what a timed-out run left outside its process group cannot be swept", async () => {
    const lines: string[] = [];
    const runner = createRunner({
      pluginsDir: join(root, "plugins-timeout"),
      cacheDir: join(root, "cache-timeout"),
      stateDir: join(root, "state-timeout"),
      runsDir: join(root, "runs-timeout"),
      appInternalUrl: "http://127.0.0.1:9",
      secret: "local-secret-0123456789",
      logger: createLogger("test", "info", (line) => lines.push(line)),
      isolation: false,
      limits: { syncTimeoutMs: 300, killGraceMs: 100 },
    });
    await runner.start();
    const name = uniqueName("local-timeout");
    writePlugin(runner.deps.bundles.pluginsDir, name, [
      { name: "hang", script: "#!/bin/sh\ncat >/dev/null\nsleep 30\n" },
    ]);
    for (let run = 0; run < 2; run++) {
      const answer = await runner.deps.tools.run(name, "hang", {});
      expect(answer).toMatchObject({ kind: "done", outcome: { success: false } });
    }
    await runner.stop();
    const warnings = lines.filter((line) => line.includes("cannot be found and may keep running"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(" WARN ");
  });
});
