import { getModels } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import { closestNames, misspelledIds, suggestion } from "./names.js";

const anthropic = getModels("anthropic").map((model) => model.id);

describe("closestNames", () => {
  it("gives the near names, nearest first, a dated snapshot by its alias, and none when nothing is near", () => {
    expect(closestNames("antropic", ["anthropic", "openai", "groq"])).toEqual(["anthropic"]);
    expect(
      closestNames("claude-sonet-4-5", ["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"]),
    ).toEqual(["claude-sonnet-4-5-20250929"]);
    // The alias stands for its own dated snapshot.
    expect(closestNames("claude-sonet-4-5", anthropic)[0]).toBe("claude-sonnet-4-5");
    expect(closestNames("claude-sonet-4-5", anthropic)).not.toContain("claude-sonnet-4-5-20250929");
    expect(closestNames("no-such-model-xyz", anthropic)).toEqual([]);
  });

  it("says so when nothing is near, naming the closest it has", () => {
    expect(suggestion("claude-sonet-4-5", anthropic).text).toMatch(/^did you mean "claude-sonnet-4-5"/);
    const far = suggestion("no-such-model-xyz", anthropic);
    expect(far.names).toHaveLength(3);
    expect(far.text).toMatch(/^none is close; it has "claude-/);
    expect(suggestion("x", []).text).toBe("");
  });
});

describe("misspelledIds", () => {
  it("takes another spelling of a listed id, or a word a letter or two from the family's, for a misspelling", () => {
    expect(misspelledIds("claude-sonet-4-5", anthropic)?.[0]).toBe("claude-sonnet-4-5");
    expect(misspelledIds("claude-sonnet-4.5", anthropic)).toEqual(["claude-sonnet-4-5"]);
    expect(misspelledIds("Claude-Haiku-4-5", anthropic)).toEqual(["claude-haiku-4-5"]);
    expect(misspelledIds("claude-opsu-4-1", anthropic)?.[0]).toBe("claude-opus-4-1");
  });

  it("does not take a new version, a new snapshot or a new line for one", () => {
    expect(misspelledIds("claude-sonnet-5", anthropic)).toBeUndefined();
    expect(misspelledIds("claude-haiku-4-5-20260101", anthropic)).toBeUndefined();
    expect(misspelledIds("claude-mythos-1", anthropic)).toBeUndefined();
    expect(misspelledIds("gpt-4x", ["gpt-4o", "gpt-4o-mini"])).toBeUndefined();
  });
});
