import { describe, expect, it } from "vitest";
import { runProcess } from "./process.js";

const base = { cwd: "/", timeoutMs: 5_000, stdoutLimitBytes: 1024, stderrLimitBytes: 1024 };

describe("runProcess", () => {
  it("passes exactly the given environment and stdin", async () => {
    const result = await runProcess({
      ...base,
      command: "/bin/sh",
      args: ["-c", "cat; tr '\\0' '\\n' < /proc/$$/environ"],
      env: { PATH: "/usr/bin:/bin", ONLY: "this" },
      stdin: "hello\n",
    });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe("hello\nPATH=/usr/bin:/bin\nONLY=this\n");
  });

  it("reports a program that cannot be started", async () => {
    const result = await runProcess({ ...base, command: "/nonexistent/tool", env: {} });
    expect(result.spawnError).toMatch(/ENOENT/);
  });

  it("survives a program that ignores a large stdin (EPIPE)", async () => {
    const result = await runProcess({
      ...base,
      command: "/bin/true",
      env: {},
      stdin: "x".repeat(5 * 1024 * 1024),
    });
    expect(result.exitCode).toBe(0);
  });

  it("caps output and marks it truncated", async () => {
    const result = await runProcess({
      ...base,
      command: "/bin/sh",
      args: ["-c", "head -c 100000 /dev/zero; head -c 5000 /dev/zero >&2"],
      env: { PATH: "/usr/bin:/bin" },
    });
    expect(result.stdout).toHaveLength(1024);
    expect(result.stdoutTruncated).toBe(true);
    expect(result.stderrTruncated).toBe(true);
  });

  it("does not wait for a background child that keeps the pipes open", async () => {
    const started = Date.now();
    const result = await runProcess({
      ...base,
      command: "/bin/sh",
      args: ["-c", "sleep 30 & echo started"],
      env: { PATH: "/usr/bin:/bin" },
    });
    expect(result.stdout).toBe("started\n");
    expect(Date.now() - started).toBeLessThan(3_000);
  });
});
