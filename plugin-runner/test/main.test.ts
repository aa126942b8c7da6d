import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { spawnServiceProcess } from "@stavrobot/common/test-support";
import { makeTempRoot } from "./helpers.js";

describe("main.ts as a real process", () => {
  const root = makeTempRoot("plugin-runner-main");
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("waits for the secret file, serves the API behind the bearer and stops on SIGTERM", async () => {
    const secretFile = join(root, "internal-secret");
    const service = await spawnServiceProcess({
      entry: "plugin-runner/src/main.ts",
      env: {
        PLUGINS_DIR: join(root, "plugins"),
        PLUGIN_CACHE_DIR: join(root, "cache"),
        PLUGIN_RUNNER_STATE_DIR: join(root, "state"),
        PLUGIN_RUNS_DIR: join(root, "runs"),
        STAVROBOT_INTERNAL_SECRET_FILE: secretFile,
        STAVROBOT_INTERNAL_SECRET: undefined,
      },
    });
    try {
      await vi.waitFor(
        () => expect(service.log()).toContain("waiting for the app to create the internal secret"),
        20_000,
      );
      writeFileSync(secretFile, "main-test-secret-0123456789\n", { mode: 0o600 });
      await service.healthy({ timeoutMs: 20_000 });
      expect((await fetch(`${service.url}/bundles`)).status).toBe(401);
      const listed = await fetch(`${service.url}/bundles`, {
        headers: { Authorization: "Bearer main-test-secret-0123456789" },
      });
      expect(await listed.json()).toEqual({
        plugins: [],
        network: { enforced: expect.any(Boolean), allowWithoutCut: false },
      });
    } finally {
      service.child.kill("SIGTERM");
    }
    expect(await service.exited).toBe(0);
    expect(service.log()).toContain("plugin-runner listening");
  });
});
