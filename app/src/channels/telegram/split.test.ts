import { parseTelegramHtml } from "@stavrobot/common/test-support";
import { describe, expect, it } from "vitest";
import { markdownToTelegramHtml } from "./markdown-html.js";
import { splitTelegramHtml } from "./split.js";
import { assertWellFormed, textContent } from "./test-helpers.js";

const nonSpace = (text: string): string => text.replace(/\s+/g, "");

function paragraphs(count: number, length: number): string {
  return Array.from({ length: count }, (_, p) => {
    const words: string[] = [];
    while (words.join(" ").length < length) words.push(`w${p}-${words.length}`);
    return words.join(" ").slice(0, length).trim();
  }).join("\n\n");
}

function assertChunks(html: string, chunks: string[], limit: number): void {
  for (const chunk of chunks) {
    expect(chunk.length).toBeLessThanOrEqual(limit);
    assertWellFormed(chunk);
    // The fake Bot API's parser refuses what Telegram refuses; the visible text is what Telegram counts.
    expect(parseTelegramHtml(chunk).length).toBeLessThanOrEqual(limit);
    expect(chunk.trim()).not.toBe("");
  }
  expect(nonSpace(chunks.map(textContent).join(""))).toBe(nonSpace(textContent(html)));
}

describe("splitTelegramHtml", () => {
  it("returns short HTML as one chunk and nothing for blank HTML", () => {
    expect(splitTelegramHtml("<b>hi</b>")).toEqual(["<b>hi</b>"]);
    expect(splitTelegramHtml("")).toEqual([]);
    expect(splitTelegramHtml(" \n\n ")).toEqual([]);
  });

  it("cuts a 10,000-character answer into 3 chunks at paragraph breaks", () => {
    const html = markdownToTelegramHtml(paragraphs(20, 499));
    expect(html.length).toBeGreaterThanOrEqual(10_000);
    const chunks = splitTelegramHtml(html);
    expect(chunks).toHaveLength(3);
    assertChunks(html, chunks, 4096);
    for (const chunk of chunks) {
      expect(chunk).toMatch(/^w\d+-0 /);
      expect(chunk).not.toMatch(/\s$/);
    }
  });

  it("cuts at a line break, then a space, before cutting a word", () => {
    expect(splitTelegramHtml("aaaa bbbb\ncccc dddd", 14)).toEqual(["aaaa bbbb", "cccc dddd"]);
    expect(splitTelegramHtml("aaaa bbbb cccc", 10)).toEqual(["aaaa bbbb", "cccc"]);
    expect(splitTelegramHtml("abcdefghij", 4)).toEqual(["abcd", "efgh", "ij"]);
  });

  it("splits one 9,000-character <pre> block, reopening its tags in every chunk", () => {
    const code = Array.from({ length: 450 }, (_, i) => `line ${String(i).padStart(4, "0")} x < y;`).join(
      "\n",
    );
    const html = markdownToTelegramHtml("```js\n" + code + "\n```");
    expect(html.length).toBeGreaterThan(9_000);
    const chunks = splitTelegramHtml(html);
    expect(chunks).toHaveLength(3);
    assertChunks(html, chunks, 4096);
    for (const chunk of chunks) {
      expect(chunk.startsWith('<pre><code class="language-js">')).toBe(true);
      expect(chunk.endsWith("</code></pre>")).toBe(true);
    }
  });

  it("never cuts inside an entity or a tag near the boundary", () => {
    for (let shift = 0; shift < 8; shift++) {
      const html = `${"a".repeat(95 + shift)}&amp;&lt;<b>bold</b>${"c".repeat(40)}`;
      const chunks = splitTelegramHtml(html, 100);
      assertChunks(html, chunks, 100);
      for (const chunk of chunks) expect(chunk).not.toMatch(/&(?!amp;|lt;)|&[a-z]*$/);
    }
  });

  it("never splits a surrogate pair", () => {
    const chunks = splitTelegramHtml("😀".repeat(10), 5);
    expect(chunks.join("")).toBe("😀".repeat(10));
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(5);
    expect(chunks.every((chunk) => !/^[\udc00-\udfff]|[\ud800-\udbff]$/.test(chunk))).toBe(true);
  });

  it("keeps every generated document within the limit, well-formed and complete", () => {
    let seed = 42;
    const random = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const pieces = [
      () => "word",
      () => "x".repeat(random(60)),
      () => " ",
      () => "\n",
      () => "\n\n",
      () => "a & b < c",
      () => `**bold ${"b".repeat(random(30))}**`,
      () => "_it **both**_",
      () => "`co<de`",
      () => `[link ${random(9)}](https://example.com/${"p".repeat(random(20))})`,
      () => "\n\n```py\n" + "code line\n".repeat(random(15)) + "```\n\n",
      () => "\n\n> quoted **text** " + "q ".repeat(random(30)) + "\n\n",
      () => "\n\n- item one\n- item **two**\n\n",
      () => "Ωμέγα 😀",
      () => "<spoiler>hidden</spoiler>",
    ];
    for (let run = 0; run < 300; run++) {
      let markdown = "";
      const count = 5 + random(60);
      for (let i = 0; i < count; i++) markdown += pieces[random(pieces.length)]?.() ?? "";
      const html = markdownToTelegramHtml(markdown);
      assertWellFormed(html);
      const limit = 120 + random(400);
      assertChunks(html, splitTelegramHtml(html, limit), limit);
    }
  });
});
