import { getModels } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import { closestModel, compareVersions, idParts } from "./template.js";

const ids = (...list: string[]) => list.map((id) => ({ id }));
const closest = (id: string, candidates: { id: string }[]) => closestModel(id, candidates)?.id;

describe("idParts", () => {
  it("splits an id into its family, its words and its version, a date ending the version", () => {
    expect(idParts("claude-3-5-haiku-20241022")).toEqual({
      family: "claude",
      words: new Set(["haiku"]),
      qualifiers: 0,
      version: [3, 5],
    });
    expect(idParts("claude-sonnet-4-5-20250929").version).toEqual([4, 5]);
    expect(idParts("gpt-4o-mini")).toMatchObject({
      family: "gpt",
      words: new Set(["o", "mini"]),
      version: [4],
    });
    expect(idParts("gpt-5.1-codex-max").version).toEqual([5, 1]);
    expect(idParts("gemini-2.5-flash-preview-05-20")).toMatchObject({ qualifiers: 1, version: [2, 5] });
    expect(idParts("Claude-Opus-5").family).toBe("claude");
  });

  it("orders versions with missing parts as zero", () => {
    expect(compareVersions([4], [4, 0])).toBe(0);
    expect(compareVersions([4], [4, 6])).toBeLessThan(0);
    expect(compareVersions([5], [4, 7])).toBeGreaterThan(0);
    expect(compareVersions([], [1])).toBeLessThan(0);
  });
});

describe("closestModel", () => {
  const claude = ids(
    "claude-3-5-haiku-20241022",
    "claude-3-5-haiku-latest",
    "claude-3-7-sonnet-20250219",
    "claude-haiku-4-5",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-1",
    "claude-opus-4-20250514",
    "claude-opus-4-7",
    "claude-sonnet-4-20250514",
    "claude-sonnet-4-5",
    "claude-sonnet-4-5-20250929",
    "claude-sonnet-4-6",
  );

  it("takes the newest model of the same line that is not newer than the id", () => {
    expect(closest("claude-sonnet-5", claude)).toBe("claude-sonnet-4-6");
    expect(closest("claude-sonnet-4-7", claude)).toBe("claude-sonnet-4-6");
    expect(closest("claude-opus-5", claude)).toBe("claude-opus-4-7");
    expect(closest("claude-haiku-4-6", claude)).toBe("claude-haiku-4-5");
    // An older model's new snapshot stays with its own version, not the line's newest.
    expect(closest("claude-3-5-haiku-20250601", claude)).toBe("claude-3-5-haiku-20241022");
    expect(closest("claude-sonnet-4-1", claude)).toBe("claude-sonnet-4-20250514");
  });

  it("prefers the alias to a dated snapshot of the same version, and a release to a preview", () => {
    expect(closest("claude-haiku-4-5-20260101", claude)).toBe("claude-haiku-4-5");
    const gemini = ids("gemini-2.5-pro", "gemini-3-pro-preview", "gemini-3.1-pro-preview", "gemini-3.1-pro");
    expect(closest("gemini-3.5-pro", gemini)).toBe("gemini-3.1-pro");
  });

  it("takes the newest of the line when the id has no version or is older than all", () => {
    expect(closest("claude-sonnet-latest", claude)).toBe("claude-sonnet-4-6");
    expect(closest("claude-haiku-2", claude)).toBe("claude-haiku-4-5");
  });

  it("with only the family shared, takes the newest model of the family", () => {
    expect(closest("claude-mythos-1", claude)).toBe("claude-opus-4-7");
  });

  it("keeps a line's tier: a mini stays a mini, a plain model stays plain", () => {
    const gpt = ids(
      "gpt-4o-mini",
      "gpt-5",
      "gpt-5-mini",
      "gpt-5.2",
      "gpt-5.2-pro",
      "gpt-5.4-mini",
      "gpt-5.5",
    );
    expect(closest("gpt-5.6-mini", gpt)).toBe("gpt-5.4-mini");
    expect(closest("gpt-5.6", gpt)).toBe("gpt-5.5");
    expect(closest("gpt-5.2-pro-2026", gpt)).toBe("gpt-5.2-pro");
    // A newer but lighter model of the line is not taken for a flash.
    const flash = ids("gemini-2.5-flash", "gemini-3-flash-preview", "gemini-3.1-flash-lite-preview");
    expect(closest("gemini-3.5-flash", flash)).toBe("gemini-3-flash-preview");
  });

  it("finds nothing outside the family, and never the id itself", () => {
    expect(closest("llama3.1:8b", claude)).toBeUndefined();
    expect(closest("gpt-5", claude)).toBeUndefined();
    expect(closest("claude-sonnet-4-6", ids("claude-sonnet-4-6"))).toBeUndefined();
    expect(closest("claude-opus-5", [])).toBeUndefined();
  });

  it("on pi-ai's own Anthropic list, gives a newer Claude a Claude of the same line", () => {
    const anthropic = getModels("anthropic");
    expect(closest("claude-sonnet-5", anthropic)).toBe("claude-sonnet-4-6");
    expect(closest("claude-opus-4-8", anthropic)).toBe("claude-opus-4-7");
    expect(closest("claude-haiku-5", anthropic)).toBe("claude-haiku-4-5");
  });
});
