import { describe, expect, it } from "vitest";
import { isStorableText, sanitizeDeep, sanitizeText } from "./text.js";

describe("sanitizeText", () => {
  it("leaves ordinary text, emoji and pairs alone", () => {
    for (const text of ["", "hello", "Γειά σου 👋", "a\u{1F600}b", "tab\tnew\nline"]) {
      expect(isStorableText(text)).toBe(true);
      expect(sanitizeText(text)).toBe(text);
    }
  });

  it("replaces NUL and lone surrogates with U+FFFD", () => {
    expect(sanitizeText("a\u0000b")).toBe("a\uFFFDb");
    expect(sanitizeText("x\uD800y")).toBe("x\uFFFDy");
    expect(sanitizeText("x\uDC00")).toBe("x\uFFFD");
    expect(sanitizeText("\uDC00\uD800")).toBe("\uFFFD\uFFFD");
    expect(isStorableText("\u0000")).toBe(false);
    expect(isStorableText("\uD83D")).toBe(false);
  });

  it("keeps a valid surrogate pair next to a broken one", () => {
    expect(sanitizeText("\uD83D\uDE00\uD83D")).toBe("\u{1F600}\uFFFD");
  });
});

describe("sanitizeDeep", () => {
  it("cleans nested strings and keys and returns the same object when nothing changed", () => {
    const clean = { a: ["x", { b: "y" }], n: 1, t: true, z: null };
    expect(sanitizeDeep(clean)).toBe(clean);
    const dirty = { "k\u0000": ["x\u0000", { b: "\uD800" }], n: 1 };
    expect(sanitizeDeep(dirty)).toEqual({ "k\uFFFD": ["x\uFFFD", { b: "\uFFFD" }], n: 1 });
    expect(JSON.stringify(sanitizeDeep(dirty))).not.toMatch(/\\u0000|\\ud800/i);
  });
});
