import { describe, expect, it } from "vitest";
import { markdownToSignal, signalToMarkdown } from "./format.js";

/** Parses signal-cli's `start:length:STYLE` strings back into objects, as signal-cli itself does. */
function parseStyles(textStyle: string[]): { start: number; length: number; style: string }[] {
  return textStyle.map((entry) => {
    const match = /^(\d+):(\d+):(.+)$/.exec(entry);
    if (!match) throw new Error(`bad text style ${entry}`);
    return { start: Number(match[1]), length: Number(match[2]), style: String(match[3]) };
  });
}

/** The substrings each style covers, e.g. `BOLD:hi`, so tests read as "what is bold" rather than offsets. */
function styledWords(markdown: string): string[] {
  const { text, textStyle } = markdownToSignal(markdown);
  return parseStyles(textStyle).map(
    ({ start, length, style }) => `${style}:${text.slice(start, start + length)}`,
  );
}

describe("markdownToSignal: inline styles", () => {
  it("maps strong, em, del, code spans and spoilers to Signal styles", () => {
    expect(markdownToSignal("a **b** _c_ ~~d~~ `e` <spoiler>f</spoiler>")).toEqual({
      text: "a b c d e f",
      textStyle: ["2:1:BOLD", "4:1:ITALIC", "6:1:STRIKETHROUGH", "8:1:MONOSPACE", "10:1:SPOILER"],
    });
  });

  it("produces overlapping ranges for nested styles", () => {
    expect(markdownToSignal("**bold _both_** after")).toEqual({
      text: "bold both after",
      textStyle: ["0:9:BOLD", "5:4:ITALIC"],
    });
    expect(styledWords("<spoiler>hidden **loud**</spoiler>")).toEqual(["SPOILER:hidden loud", "BOLD:loud"]);
  });

  it("keeps Markdown characters inside code literal", () => {
    expect(markdownToSignal("run `**not bold** _x_` now")).toEqual({
      text: "run **not bold** _x_ now",
      textStyle: ["4:16:MONOSPACE"],
    });
  });

  it("counts offsets in UTF-16 code units around emoji and Greek text", () => {
    expect(markdownToSignal("👋 **hi**")).toEqual({ text: "👋 hi", textStyle: ["3:2:BOLD"] });
    expect(markdownToSignal("**👋🏽 hi** there")).toEqual({ text: "👋🏽 hi there", textStyle: ["0:7:BOLD"] });
    expect(markdownToSignal("Γειά **σου**")).toEqual({ text: "Γειά σου", textStyle: ["5:3:BOLD"] });
    expect(styledWords("😀 Καλη _μέρα 🌞_ και `κώδικας`")).toEqual(["ITALIC:μέρα 🌞", "MONOSPACE:κώδικας"]);
  });

  it("writes links as text (url), or just the url when the text is the url", () => {
    expect(markdownToSignal("see [the docs](https://x.example/a) and <https://y.example>").text).toBe(
      "see the docs (https://x.example/a) and https://y.example",
    );
    expect(markdownToSignal("[https://z.example](https://z.example) or https://w.example").text).toBe(
      "https://z.example or https://w.example",
    );
    expect(styledWords("[**bold** link](https://x.example)")).toEqual(["BOLD:bold"]);
  });

  it("replaces images with their alt text and keeps raw HTML literal", () => {
    expect(markdownToSignal("![a cat](cat.png) <b>raw</b> AT&amp;T").text).toBe("a cat <b>raw</b> AT&T");
  });

  it("leaves an unpaired spoiler tag as text", () => {
    expect(markdownToSignal("<spoiler>never closed")).toEqual({
      text: "<spoiler>never closed",
      textStyle: [],
    });
  });
});

describe("markdownToSignal: blocks", () => {
  it("makes headings bold and separates paragraphs with a blank line", () => {
    expect(markdownToSignal("# Title\n\nfirst\nline\n\nsecond")).toEqual({
      text: "Title\n\nfirst\nline\n\nsecond",
      textStyle: ["0:5:BOLD"],
    });
  });

  it("keeps code blocks verbatim and monospace", () => {
    const { text, textStyle } = markdownToSignal(
      "Before:\n\n```md\n# not a heading\n- **not** a list\n```\n",
    );
    expect(text).toBe("Before:\n\n# not a heading\n- **not** a list");
    expect(textStyle).toEqual(["9:32:MONOSPACE"]);
  });

  it("renders bullet, ordered, nested and task lists", () => {
    expect(markdownToSignal("- one\n  - nested **n**\n- two\n\n3. three\n4. four").text).toBe(
      "- one\n  - nested n\n- two\n\n3. three\n4. four",
    );
    expect(styledWords("- one\n  - nested **n**")).toEqual(["BOLD:n"]);
    expect(markdownToSignal("- [ ] todo\n- [x] done").text).toBe("- [ ] todo\n- [x] done");
  });

  it("prefixes blockquotes with > on every line", () => {
    expect(markdownToSignal("> quoted **q**\n> still\n>\n> second").text).toBe(
      "> quoted q\n> still\n>\n> second",
    );
    expect(styledWords("> quoted **q**")).toEqual(["BOLD:q"]);
  });

  it("keeps horizontal rules and flattens tables into lines", () => {
    expect(markdownToSignal("above\n\n---\n\nbelow").text).toBe("above\n\n---\n\nbelow");
    expect(markdownToSignal("| a | b |\n|---|---|\n| 1 | **2** |").text).toBe("a | b\n1 | 2");
  });

  it("leaves no trailing whitespace", () => {
    expect(markdownToSignal("text  \n\n\n- \n\n```\ncode   \n```\n\n   ").text).toBe("text\n\n-\n\ncode");
  });
});

describe("signalToMarkdown", () => {
  it("returns the text unchanged without styles", () => {
    expect(signalToMarkdown("plain *text*", undefined)).toBe("plain *text*");
    expect(signalToMarkdown("plain", [])).toBe("plain");
  });

  it("maps every Signal style to Markdown", () => {
    const styles = [
      { start: 0, length: 1, style: "BOLD" },
      { start: 2, length: 1, style: "ITALIC" },
      { start: 4, length: 1, style: "STRIKETHROUGH" },
      { start: 6, length: 1, style: "MONOSPACE" },
      { start: 8, length: 1, style: "SPOILER" },
    ];
    expect(signalToMarkdown("a b c d e", styles)).toBe("**a** _b_ ~~c~~ `d` <spoiler>e</spoiler>");
  });

  it("reads offsets as UTF-16 code units", () => {
    expect(signalToMarkdown("👋 hi", [{ start: 3, length: 2, style: "BOLD" }])).toBe("👋 **hi**");
    expect(signalToMarkdown("Γειά σου", [{ start: 5, length: 3, style: "ITALIC" }])).toBe("Γειά _σου_");
  });

  it("never splits a surrogate pair", () => {
    expect(signalToMarkdown("a👋b", [{ start: 2, length: 1, style: "BOLD" }])).toBe("a**👋**b");
  });

  it("ignores unknown styles and clamps out-of-range offsets", () => {
    const styles = [
      { start: -4, length: 6, style: "BOLD" },
      { start: 3, length: 999, style: "ITALIC" },
      { start: 50, length: 2, style: "SPOILER" },
      { start: 0, length: 2, style: "SPARKLE" },
      { start: Number.NaN, length: 1, style: "BOLD" },
    ];
    expect(signalToMarkdown("abc def", styles)).toBe("**ab**c _def_");
  });

  it("nests overlapping and nested ranges properly", () => {
    const nested = [
      { start: 0, length: 9, style: "BOLD" },
      { start: 5, length: 4, style: "ITALIC" },
    ];
    expect(signalToMarkdown("bold both after", nested)).toBe("**bold _both_** after");
    const crossing = [
      { start: 0, length: 7, style: "BOLD" },
      { start: 5, length: 6, style: "STRIKETHROUGH" },
    ];
    expect(signalToMarkdown("aaaa bb ccc", crossing)).toBe("**aaaa** ~~**bb** ccc~~");
  });

  it("keeps markers off whitespace and uses * for italics inside a word", () => {
    expect(signalToMarkdown("say hello there", [{ start: 3, length: 7, style: "BOLD" }])).toBe(
      "say **hello** there",
    );
    expect(signalToMarkdown("unbelievable", [{ start: 2, length: 6, style: "ITALIC" }])).toBe(
      "un*believ*able",
    );
  });

  it("suspends other styles inside code and fences code that spans lines", () => {
    const styles = [
      { start: 0, length: 12, style: "BOLD" },
      { start: 4, length: 4, style: "MONOSPACE" },
    ];
    expect(signalToMarkdown("see code now", styles)).toBe("**see** `code` **now**");
    expect(signalToMarkdown("a `tick`", [{ start: 2, length: 6, style: "MONOSPACE" }])).toBe(
      "a `` `tick` ``",
    );
    expect(signalToMarkdown("run:\nls -la\ncd /\ndone", [{ start: 5, length: 11, style: "MONOSPACE" }])).toBe(
      "run:\n```\nls -la\ncd /\n```\ndone",
    );
  });
});

describe("round trip", () => {
  it("markdown -> signal -> markdown keeps the styled words", () => {
    const markdown =
      "# Plan\n\nWe **must** ship _today_, not ~~tomorrow~~. Run `npm test` first.\n\n" +
      "- 👋 **Γειά** <spoiler>surprise</spoiler>\n- **bold _and italic_**";
    const first = markdownToSignal(markdown);
    const back = signalToMarkdown(first.text, parseStyles(first.textStyle));
    expect(markdownToSignal(back)).toEqual(first);
    expect(styledWords(back)).toEqual(styledWords(markdown));
    expect(styledWords(markdown)).toEqual([
      "BOLD:Plan",
      "BOLD:must",
      "ITALIC:today",
      "STRIKETHROUGH:tomorrow",
      "MONOSPACE:npm test",
      "BOLD:Γειά",
      "SPOILER:surprise",
      "BOLD:bold and italic",
      "ITALIC:and italic",
    ]);
  });
});

describe("hostile input", () => {
  it("survives unclosed markers", () => {
    for (const markdown of [
      "**never",
      "_half",
      "`tick",
      "~~strike",
      "[link](",
      "</spoiler> x",
      "```\nopen",
    ]) {
      expect(() => markdownToSignal(markdown)).not.toThrow();
    }
    expect(markdownToSignal("**never closed").text).toBe("**never closed");
  });

  it("handles 100k-character inputs without throwing", () => {
    const inputs = [
      "**a _b ".repeat(12_500),
      "[".repeat(100_000),
      "<spoiler>".repeat(11_000),
      "> ".repeat(50_000),
      "- ".repeat(50_000),
      "👋`x".repeat(25_000),
    ];
    for (const markdown of inputs) {
      const { text, textStyle } = markdownToSignal(markdown);
      expect(text.length).toBeGreaterThan(0);
      expect(() => signalToMarkdown(text, parseStyles(textStyle))).not.toThrow();
    }
    const text = "x".repeat(100_000);
    const styles = Array.from({ length: 20_000 }, (_, i) => ({
      start: i * 5,
      length: 7,
      style: ["BOLD", "ITALIC", "MONOSPACE", "SPOILER"][i % 4] ?? "BOLD",
    }));
    expect(signalToMarkdown(text, styles).length).toBeGreaterThan(text.length);
  });
});
