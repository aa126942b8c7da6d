import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runProcess } from "@stavrobot/common";
import { formatOutput } from "../src/script.js";
import { makeTempRoot } from "./helpers.js";

const limits = { timeoutMs: 10_000, stdoutLimitBytes: 1024, stderrLimitBytes: 1024 };

/*
 * The output text goes to the model and into the stored conversation. A program that cannot be
 * started is named by its path, here a run's directory under a temporary directory, as a uv or
 * python3 found there would be: the text names the program and the reason, not the machine's
 * directories.
 */
describe("a script whose program cannot be started", () => {
  const root = makeTempRoot("python-runner-spawn");
  const runDir = join(root, "state", "runs", "0b7e1c9a-2f4d-4d7e-9c3a-5e6f7a8b9c0d");
  mkdirSync(runDir, { recursive: true });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const start = (command: string) =>
    runProcess({
      command,
      args: [join(runDir, "script.py")],
      cwd: runDir,
      env: { PATH: "/usr/bin:/bin" },
      timeoutMs: limits.timeoutMs,
      stdoutLimitBytes: limits.stdoutLimitBytes,
      stderrLimitBytes: limits.stderrLimitBytes,
    });

  it("is reported without the run directory when the program is missing", async () => {
    const result = await start(join(runDir, "uv"));
    expect(result.spawnError).toContain(runDir);
    const text = formatOutput(result, limits);
    expect(text).toBe("Failed to spawn process: spawn uv ENOENT");
    expect(text).not.toContain(root);
  });

  it("is reported without the run directory when the program may not be run", async () => {
    const program = join(runDir, "python3");
    writeFileSync(program, "#!/bin/sh\necho never\n");
    chmodSync(program, 0o644);
    const result = await start(program);
    expect(result.spawnError).toContain(runDir);
    const text = formatOutput(result, limits);
    expect(text).toBe("Failed to spawn process: spawn python3 EACCES");
    expect(text).not.toContain(root);
  });
});
