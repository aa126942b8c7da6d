import { describe, expect, it } from "vitest";
import type { ProcessResult } from "@stavrobot/common";
import { cyclopOneAnswer, cyclopOneFailure } from "./cyclopone-run.js";

const finished = (stdout: string, extra: Partial<ProcessResult> = {}): ProcessResult => ({
  exitCode: 0,
  signal: null,
  stdout,
  stderr: "",
  stdoutTruncated: false,
  stderrTruncated: false,
  timedOut: false,
  durationMs: 1,
  ...extra,
});

describe("a Cyclop One tool's answer, as its host reads it", () => {
  const MB = 1024 * 1024;

  it("takes result and is_error from a JSON object", () => {
    expect(cyclopOneAnswer(finished('{"result":"Hello","is_error":false}\n'), MB)).toEqual({
      success: true,
      output: "Hello",
    });
    expect(cyclopOneAnswer(finished('{"result":"File not found","is_error":true}'), MB)).toEqual({
      success: false,
      error: "File not found",
    });
    expect(cyclopOneAnswer(finished('{"result":{"n":1}}'), MB)).toEqual({ success: true, output: '{"n":1}' });
    expect(cyclopOneAnswer(finished('{"is_error":false}'), MB)).toEqual({
      success: true,
      output: "(no result field)",
    });
  });

  it("takes anything else as the text result, and refuses empty or oversized output", () => {
    expect(cyclopOneAnswer(finished("up 3 days\n"), MB)).toEqual({ success: true, output: "up 3 days" });
    expect(cyclopOneAnswer(finished("[1, 2]"), MB)).toEqual({ success: true, output: "[1, 2]" });
    expect(cyclopOneAnswer(finished(" \n"), MB)).toEqual({
      success: false,
      error: "Plugin returned no output",
    });
    expect(cyclopOneAnswer(finished("x".repeat(10), { stdoutTruncated: true }), MB)).toEqual({
      success: false,
      error: "Plugin output exceeded 1 MB",
    });
  });

  it("words a failed run as its host does: the exit and the first 500 characters of stderr", () => {
    const failed = finished("dropped", { exitCode: 2, stderr: "e".repeat(600) });
    expect(cyclopOneFailure(failed)).toBe(`Plugin process failed (exit 2): ${"e".repeat(500)}`);
    expect(cyclopOneFailure(finished("", { exitCode: null, signal: "SIGSEGV" }))).toBe(
      "Plugin process failed (signal SIGSEGV)",
    );
  });
});
