import { describe, expect, it } from "vitest";
import { callOutcome } from "./result.js";
import { HIDDEN, Redactor } from "./redact.js";

const none = new Redactor([]);

describe("an MCP tool result as a run's outcome", () => {
  it("joins text blocks; audio and binary resources become files; links and other blocks stay readable", () => {
    const outcome = callOutcome(
      "speak",
      {
        content: [
          { type: "text", text: "first" },
          { type: "audio", data: "UklGRg==", mimeType: "audio/wav" },
          {
            type: "resource",
            resource: { uri: "file:///reports/q3.pdf", mimeType: "application/pdf", blob: "JVBERg==" },
          },
          { type: "resource_link", uri: "file:///big.csv", name: "big.csv", description: "all rows" },
          { type: "future-kind", value: 1 },
        ],
      },
      none,
    );
    expect(outcome).toEqual({
      success: true,
      output:
        "first\n[audio audio/wav: output file speak-1.wav]\n" +
        "[resource file:///reports/q3.pdf (application/pdf): output file q3.pdf]\n" +
        "[resource link big.csv file:///big.csv: all rows]\n" +
        '{"type":"future-kind","value":1}',
      files: [
        { filename: "speak-1.wav", data: "UklGRg==" },
        { filename: "q3.pdf", data: "JVBERg==" },
      ],
    });
  });

  it("isError without text still says what failed", () => {
    expect(callOutcome("x", { content: [], isError: true }, none)).toEqual({
      success: false,
      error: 'Tool "x" reported an error without saying what.',
    });
  });

  it("removes secret values from text and structured content, keys included", () => {
    const redact = new Redactor(["sk-live-123456", "abc"]);
    const outcome = callOutcome(
      "t",
      {
        content: [{ type: "text", text: "token sk-live-123456 used" }],
        structuredContent: { "sk-live-123456": ["sk-live-123456"] },
      },
      redact,
    );
    expect(outcome).toEqual({
      success: true,
      output: { content: `token ${HIDDEN} used`, structuredContent: { [HIDDEN]: [HIDDEN] } },
    });
    // Values shorter than four characters are not hidden (they would blank ordinary words).
    expect(redact.text("abc")).toBe("abc");
  });
});
