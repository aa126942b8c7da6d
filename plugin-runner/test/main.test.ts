import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, makeTempRoot, waitFor } from "./helpers.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

describe("main.ts as a real process", () => {
  const root = makeTempRoot("plugin-runner-main");
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("waits for the secret file, serves the API behind the bearer and stops on SIGTERM", async () => {
    const port = await freePort();
    const secretFile = join(root, "internal-secret");
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: String(port),
      PLUGINS_DIR: join(root, "plugins"),
      PLUGIN_CACHE_DIR: join(root, "cache"),
      PLUGIN_RUNNER_STATE_DIR: join(root, "state"),
      PLUGIN_RUNS_DIR: join(root, "runs"),
      STAVROBOT_INTERNAL_SECRET_FILE: secretFile,
    };
    delete env.STAVROBOT_INTERNAL_SECRET;
    const child = spawn(
      process.execPath,
      ["--conditions=source", "--import", "tsx", "plugin-runner/src/main.ts"],
      { cwd: repoRoot, env, stdio: ["ignore", "ignore", "pipe"] },
    );
    let log = "";
    child.stderr.on("data", (chunk: Buffer) => (log += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await waitFor(
        () => log.includes("waiting for the app to create the internal secret"),
        20_000,
        "wait log",
      );
      writeFileSync(secretFile, "main-test-secret-0123456789\n", { mode: 0o600 });
      const url = `http://127.0.0.1:${port}`;
      await waitFor(
        () =>
          fetch(`${url}/health`).then(
            (response) => response.ok,
            () => false,
          ),
        20_000,
        "health",
      );
      expect((await fetch(`${url}/bundles`)).status).toBe(401);
      const listed = await fetch(`${url}/bundles`, {
        headers: { Authorization: "Bearer main-test-secret-0123456789" },
      });
      expect(await listed.json()).toEqual({ plugins: [] });
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
    expect(log).toContain("plugin-runner listening");
  });
});
