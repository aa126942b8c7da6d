import { describe, expect, it } from "vitest";
import type { ProcessResult } from "@stavrobot/common";
import { buildScript, formatOutput } from "./script.js";

const limits = { timeoutMs: 30_000, stdoutLimitBytes: 1024 * 1024, stderrLimitBytes: 64 * 1024 };

function result(fields: Partial<ProcessResult>): ProcessResult {
  return {
    exitCode: 0,
    signal: null,
    stdout: "",
    stderr: "",
    stdoutTruncated: false,
    stderrTruncated: false,
    timedOut: false,
    durationMs: 1,
    ...fields,
  };
}

describe("buildScript", () => {
  it("puts the dependencies in a PEP 723 header, and nothing without them", () => {
    expect(buildScript("print(1)", ["numpy", "requests>=2.31"])).toBe(
      '# /// script\n# dependencies = ["numpy", "requests>=2.31"]\n# ///\nprint(1)',
    );
    expect(buildScript("print(1)", [])).toBe("print(1)");
  });
});

describe("formatOutput", () => {
  it("builds the reference's text", () => {
    expect(formatOutput(result({ stdout: "a\n" }), limits)).toBe("a\n");
    expect(formatOutput(result({ stdout: "a\n", stderr: "b" }), limits)).toBe("a\n\nstderr:\nb");
    expect(formatOutput(result({ exitCode: 2 }), limits)).toBe("Exit code: 2.");
    expect(formatOutput(result({ exitCode: null, timedOut: true }), limits)).toBe(
      "Process timed out after 30 seconds.",
    );
    expect(formatOutput(result({}), limits)).toBe("Script produced no output.");
    expect(formatOutput(result({ exitCode: null, signal: "SIGKILL" }), limits)).toBe(
      "Exit code: -9 (killed by SIGKILL).",
    );
  });

  it("adds truncation and file notes after the text", () => {
    const text = formatOutput(result({ stdout: "x", stdoutTruncated: true }), limits, ["Note."]);
    expect(text).toBe("x\n[stdout truncated after 1 MB]\nNote.");
    expect(formatOutput(result({}), limits, ["Note."])).toBe("Script produced no output.\nNote.");
  });

  it("says why a script could not start", () => {
    expect(formatOutput(result({ exitCode: null, spawnError: "spawn uv ENOENT" }), limits)).toBe(
      "Failed to spawn process: spawn uv ENOENT",
    );
  });
});
