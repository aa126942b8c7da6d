import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SYSTEM_TOOL_PATH, parseEnv, silentLogger } from "@stavrobot/common";
import { defaultToolPath, pythonRunnerConfig, pythonRunnerEnvSchema } from "./config.js";
import { PythonRunner } from "./runner.js";

describe("configuration", () => {
  const dir = mkdtempSync(join(tmpdir(), "python-runner-config-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("puts the directories where the service finds uv and python3 before the system ones", () => {
    writeFileSync(join(dir, "uv"), "#!/bin/sh\n");
    chmodSync(join(dir, "uv"), 0o755);
    expect(defaultToolPath(`${dir}:/usr/bin`)).toBe(
      `${dir}:/usr/bin:${SYSTEM_TOOL_PATH.replace(":/usr/bin", "")}`,
    );
    expect(defaultToolPath("")).toBe(SYSTEM_TOOL_PATH);
  });

  it("has defaults for everything and names a wrong variable", () => {
    const config = pythonRunnerConfig(parseEnv("python-runner", pythonRunnerEnvSchema, { PATH: "/usr/bin" }));
    expect(config).toMatchObject({ plainSandbox: false, timeoutMs: 30_000 });
    expect(config.stateDir).toBe(join(process.cwd(), "data/python-runner"));
    expect(() =>
      parseEnv("python-runner", pythonRunnerEnvSchema, { PYTHON_RUNNER_TIMEOUT_MS: "soon" }),
    ).toThrow(/PYTHON_RUNNER_TIMEOUT_MS/);
    const env = parseEnv("python-runner", pythonRunnerEnvSchema, {
      PYTHON_RUNNER_TOOL_PATH: "/x",
      PORT: "9",
    });
    expect(pythonRunnerConfig(env).toolPath).toBe("/x");
    expect(env.PORT).toBe(9);
  });
});

describe.runIf(process.getuid?.() === 0)("the run user", () => {
  it("is refused when it maps to root", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "python-runner-root-user-"));
    try {
      const creating = PythonRunner.create({
        stateDir,
        toolPath: SYSTEM_TOOL_PATH,
        runUser: "root",
        logger: silentLogger,
      });
      await expect(creating).rejects.toThrow(/maps to root; refusing/);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
