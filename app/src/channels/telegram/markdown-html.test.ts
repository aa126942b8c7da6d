import { parseTelegramHtml } from "@stavrobot/common/test-support";
import { describe, expect, it } from "vitest";
import { markdownToTelegramHtml } from "./markdown-html.js";
import { assertWellFormed, textContent } from "./test-helpers.js";

describe("markdownToTelegramHtml", () => {
  it("escapes <, > and & in text", () => {
    expect(markdownToTelegramHtml("1 < 2 && 3 > 2")).toBe("1 &lt; 2 &amp;&amp; 3 &gt; 2");
    expect(markdownToTelegramHtml("AT&amp;T says &copy;")).toBe("AT&amp;T says &amp;copy;");
  });

  it("shows raw HTML instead of obeying it, inline and as a block", () => {
    expect(markdownToTelegramHtml('Hi <b onclick="x()">there</b>')).toBe(
      'Hi &lt;b onclick="x()"&gt;there&lt;/b&gt;',
    );
    const block = markdownToTelegramHtml("<script>\nalert(1)\n</script>\n\nafter");
    expect(block).toBe("&lt;script&gt;\nalert(1)\n&lt;/script&gt;\n\nafter");
    assertWellFormed(block);
  });

  it("renders code verbatim and escaped, never formatted", () => {
    expect(markdownToTelegramHtml("run `a<b && **c**`")).toBe("run <code>a&lt;b &amp;&amp; **c**</code>");
    expect(markdownToTelegramHtml("```ts\nif (a < b) { _x_ }\n```")).toBe(
      '<pre><code class="language-ts">if (a &lt; b) { _x_ }</code></pre>',
    );
    expect(markdownToTelegramHtml("```\nplain & simple\n```")).toBe("<pre>plain &amp; simple</pre>");
    expect(markdownToTelegramHtml('```"><x\ncode\n```')).not.toContain("<x");
  });

  it("nests emphasis", () => {
    expect(markdownToTelegramHtml("**bold _both_** ~~gone~~ *it*")).toBe(
      "<b>bold <i>both</i></b> <s>gone</s> <i>it</i>",
    );
  });

  it("keeps only http(s), tg and mailto links", () => {
    expect(markdownToTelegramHtml('[docs](https://example.com/?a=1&b="2")')).toBe(
      '<a href="https://example.com/?a=1&amp;b=&quot;2&quot;">docs</a>',
    );
    expect(markdownToTelegramHtml("[me](tg://user?id=1) <x@example.com>")).toBe(
      '<a href="tg://user?id=1">me</a> <a href="mailto:x@example.com">x@example.com</a>',
    );
    expect(markdownToTelegramHtml("[click](javascript:alert(1)) and [rel](/path)")).toBe("click and rel");
    expect(markdownToTelegramHtml("see www.example.com")).toBe(
      'see <a href="http://www.example.com">www.example.com</a>',
    );
  });

  it("does not put code inside a link, which Telegram refuses", () => {
    expect(markdownToTelegramHtml("[`npm i`](https://npmjs.com)")).toBe(
      '<a href="https://npmjs.com">npm i</a>',
    );
  });

  it("turns headings into bold lines and separates blocks by one blank line", () => {
    expect(markdownToTelegramHtml("# Title\n\nText\n\n## Sub *x*\n\n---\n\nEnd")).toBe(
      "<b>Title</b>\n\nText\n\n<b>Sub <i>x</i></b>\n\n———\n\nEnd",
    );
  });

  it("renders lists as bullet and number lines, nested lists indented", () => {
    expect(markdownToTelegramHtml("- one\n- **two**\n  - deep\n\n3. c\n4. d")).toBe(
      "• one\n• <b>two</b>\n  • deep\n\n3. c\n4. d",
    );
    expect(markdownToTelegramHtml("- [ ] todo\n- [x] done")).toBe("• ☐ todo\n• ☑ done");
  });

  it("renders images as their alt text or URL", () => {
    expect(markdownToTelegramHtml("![a cat](http://x/cat.png) ![](http://x/dog.png)")).toBe(
      "a cat http://x/dog.png",
    );
  });

  it("keeps every table cell as monospace text", () => {
    const html = markdownToTelegramHtml(
      "| Name | Qty |\n|---|---|\n| `apple` | [3](http://e) |\n| b<c | 10 |",
    );
    expect(html).toBe("<pre>Name  | Qty\n------+----\napple | 3\nb&lt;c   | 10</pre>");
  });

  it("quotes once, flattening nested quotes", () => {
    const html = markdownToTelegramHtml("> outer\n> > inner");
    expect(html).toBe("<blockquote>outer\n\ninner</blockquote>");
  });

  it("turns <spoiler> into tg-spoiler and never leaves one unbalanced", () => {
    expect(markdownToTelegramHtml("a <spoiler>secret</spoiler> b")).toBe(
      "a <tg-spoiler>secret</tg-spoiler> b",
    );
    const html = markdownToTelegramHtml("<spoiler>a **b</spoiler> c** </spoiler>");
    assertWellFormed(html);
    expect(textContent(html)).toContain("a b");
  });

  it("produces well-formed HTML for a mixed document", () => {
    const markdown = [
      "# Report <draft>",
      "Some **bold and _italic `code`_** text with a [link](https://e.com/a_b).",
      "> quote with `code` and **bold**\n> - a list in a quote",
      "1. first\n2. second\n   ```py\n   print('x < y')\n   ```",
      "<div>raw</div>",
      "| a | b |\n|--|--|\n| 1 | 2 |",
    ].join("\n\n");
    const html = markdownToTelegramHtml(markdown);
    assertWellFormed(html);
    expect(() => parseTelegramHtml(html)).not.toThrow();
    expect(textContent(html)).toContain("Report <draft>");
    expect(textContent(html)).toContain("print('x < y')");
  });
});
