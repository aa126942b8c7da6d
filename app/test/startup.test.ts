import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { createTestDatabase, type TestDatabase } from "./helpers/db.js";
import { post } from "./helpers/app.js";
import { repoRoot, startAppProcess, waitFor, type AppProcess } from "./helpers/process.js";

let dir: string;
let database: TestDatabase | undefined;
let running: AppProcess | undefined;

afterEach(async () => {
  await running?.stop();
  running = undefined;
  await database?.drop();
  database = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function baseEnv(): NodeJS.ProcessEnv {
  dir = mkdtempSync(join(tmpdir(), "stavrobot-start-"));
  return { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dir, TZ: "UTC" };
}

describe("npm start", () => {
  it("on first run writes a config with a generated password, stays up, and explains the missing key", async () => {
    database = await createTestDatabase();
    const env = { ...baseEnv(), ...database.env };
    running = await startAppProcess(env);
    const configPath = join(dir, "main", "config.toml");
    const config = readFileSync(configPath, "utf8");
    const password = /^password = "([^"]+)"$/m.exec(config)?.[1];
    expect(password).toBeDefined();
    expect(password).not.toBe("CHANGE-ME");
    expect(statSync(configPath).mode & 0o777).toBe(0o600);
    // The internal secret was generated beside it, also private.
    expect(statSync(join(dir, "main", "internal-secret")).mode & 0o777).toBe(0o600);
    expect(running.output()).toContain("Add your LLM provider key");

    const reply = await post(running.port, "/chat", { message: "hi" }, basicAuthHeader(password!));
    expect(reply.status).toBe(503);
    expect(String(reply.body.error)).toContain("no LLM provider key");
    expect(String(reply.body.error)).toContain(configPath);
    // Nothing was queued for a message that could not be answered.
    expect((await post(running.port, "/chat", { message: "hi" }, basicAuthHeader("wrong"))).status).toBe(401);
    expect(await running.stop("SIGTERM")).toBe(0);
  }, 90_000);

  it("stops with a message naming the key when the config is invalid", async () => {
    const env = baseEnv();
    mkdirSync(join(dir, "main"), { recursive: true });
    writeFileSync(
      join(dir, "main", "config.toml"),
      'model = "claude-sonnet-4-5"\npassword = "long-enough-pw"\ncontextTokensK = "lots"\n',
    );
    const child = spawn(
      process.execPath,
      ["--conditions=source", "--import", "tsx", "app/src/start-local.ts"],
      {
        cwd: repoRoot,
        env: { ...env, PORT: "0", INTERNAL_PORT: "0" },
      },
    );
    let output = "";
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(78);
    expect(output).toContain('key "contextTokensK"');
  }, 30_000);

  it("leaves no plugin-runner behind when it is killed with kill -9", async () => {
    database = await createTestDatabase();
    running = await startAppProcess({ ...baseEnv(), ...database.env });
    const runnerUrl = `http://127.0.0.1:${running.runnerPort}/health`;
    // The app can be up before its runner child is listening.
    await waitFor(
      () =>
        fetch(runnerUrl).then(
          (r) => r.ok,
          () => false,
        ),
      30_000,
      "the runner to start",
    );
    running.child.kill("SIGKILL"); // only the launcher, as a crash would
    await running.exited;
    await waitFor(
      () =>
        fetch(runnerUrl).then(
          () => false,
          () => true,
        ),
      10_000,
      "the runner to exit",
    );
  }, 90_000);
});
