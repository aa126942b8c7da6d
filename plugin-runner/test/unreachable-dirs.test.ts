import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "@stavrobot/common";
import { createRunner } from "../src/runtime.js";
import { isRoot, makeTempRoot } from "./helpers.js";

describe.skipIf(!isRoot)("plugin directories behind a private parent (e.g. a checkout under /root)", () => {
  const root = makeTempRoot("plugin-runner-private");
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("says at start-up that plugin tools will fail, why, and how to fix it", async () => {
    const hidden = join(root, "private-home");
    mkdirSync(hidden);
    chmodSync(hidden, 0o700);
    const lines: string[] = [];
    const runner = createRunner({
      pluginsDir: join(hidden, "plugins"),
      cacheDir: join(hidden, "cache"),
      stateDir: join(hidden, "state"),
      runsDir: join(hidden, "runs"),
      appInternalUrl: "http://127.0.0.1:9",
      secret: "private-secret-0123456789",
      logger: createLogger("test", "info", (line) => lines.push(line)),
      isolation: true,
    });
    await runner.start();
    await runner.stop();
    const errors = lines.filter(
      (line) => line.includes(" ERROR ") && line.includes("plugin users cannot reach"),
    );
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0]).toContain(`${hidden} is not searchable by other users`);
    expect(errors[0]).toContain(`chmod o+x ${hidden}`);
  });
});
