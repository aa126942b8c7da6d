import { describe, expect, it } from "vitest";
import { DomainError } from "@stavrobot/common";
import { checkGitUrl } from "./git.js";
import { guessMimeType } from "@stavrobot/common";
import { fence, toolResultMessage } from "./chat-messages.js";
import { idempotencyKeyFor } from "@stavrobot/common";
import { truncateInstructions } from "./present.js";
import { pluginUserName } from "./users.js";

describe("checkGitUrl", () => {
  it("accepts network URLs", () => {
    for (const url of [
      "https://github.com/stavrobot/plugin-x.git",
      "http://127.0.0.1:8080/repo",
      "git://127.0.0.1:9418/repo",
      "ssh://git@example.com/repo.git",
      "git@github.com:stavrobot/plugin-x.git",
      "https://[::1]/repo",
    ]) {
      expect(() => checkGitUrl(url)).not.toThrow();
    }
  });

  it("refuses local, helper and option-looking URLs", () => {
    for (const url of [
      "file:///etc",
      "/srv/repo",
      "ext::sh -c id",
      "--upload-pack=id",
      "-c",
      "fd::3",
      "https://a b",
    ]) {
      expect(() => checkGitUrl(url)).toThrow(DomainError);
    }
  });
});

describe("pluginUserName", () => {
  it("maps names to plug_ users that fit in 32 characters without collisions", () => {
    expect(pluginUserName("google-calendar")).toBe("plug_google_calendar");
    const long1 = pluginUserName("a-very-long-plugin-name-that-goes-on-1");
    const long2 = pluginUserName("a-very-long-plugin-name-that-goes-on-2");
    expect(long1).toHaveLength(32);
    expect(long1).not.toBe(long2);
    expect(long1.startsWith("plug_a_very_long")).toBe(true);
  });
});

describe("messages", () => {
  it("fences text with a fence longer than any backtick run inside", () => {
    expect(fence("plain")).toBe("```\nplain\n```");
    expect(fence("has ``` inside")).toBe("````\nhas ``` inside\n````");
  });

  it("carries an async result to the app as the outcome a synchronous run answers with", () => {
    const message = toolResultMessage("p", "t", {
      success: true,
      output: "done",
      files: [{ filename: "a.png", data: "AA==" }],
    });
    expect(message).toEqual({
      source: "plugin:p/t",
      pluginResult: {
        plugin: "p",
        tool: "t",
        outcome: { success: true, output: "done", files: [{ filename: "a.png", data: "AA==" }] },
      },
    });
    expect(guessMimeType("x.unknown")).toBe("application/octet-stream");
    expect(guessMimeType("a.png")).toBe("image/png");
  });

  it("leaves out files the app would refuse, with a note", () => {
    // Over 10 MB once decoded: the app refuses a file that large.
    const big = "A".repeat(Math.ceil((10 * 1024 * 1024) / 3) * 4 + 4);
    const message = toolResultMessage("p", "t", {
      success: true,
      output: { ok: true },
      files: [
        { filename: "small.txt", data: "AA==" },
        { filename: "huge.bin", data: big },
      ],
    });
    const outcome = message.pluginResult?.outcome;
    if (!outcome?.success) throw new Error("expected a success");
    expect(outcome.files?.map((file) => file.filename)).toEqual(["small.txt"]);
    expect(outcome.warnings).toContain("(Output files too large to deliver were left out: huge.bin.)");
  });

  it("truncates long instructions", () => {
    expect(truncateInstructions("short")).toBe("short");
    expect(truncateInstructions("   ")).toBeUndefined();
    const long = truncateInstructions("y".repeat(6000)) ?? "";
    expect(long.startsWith("y".repeat(5000) + "\n[Instructions truncated]")).toBe(true);
  });
});

describe("idempotencyKeyFor", () => {
  it("uses the outbox file name, or a hash of it when the name does not fit the contract", () => {
    const name = "000001712345678901-0b7d9a3e-6f4c-4c1e-9d7a-2f1e8c3b5a60.json";
    expect(idempotencyKeyFor(name, "plugin-runner")).toBe(`plugin-runner:${name.slice(0, -5)}`);
    expect(idempotencyKeyFor(name, "plugin-runner")).toBe(idempotencyKeyFor(name, "plugin-runner"));
    for (const odd of ["a b.json", `${"x".repeat(300)}.json`]) {
      expect(idempotencyKeyFor(odd, "plugin-runner")).toMatch(/^plugin-runner:sha256-[0-9a-f]{64}$/);
    }
    expect(idempotencyKeyFor("a b.json", "plugin-runner")).not.toBe(
      idempotencyKeyFor("a  b.json", "plugin-runner"),
    );
  });
});
