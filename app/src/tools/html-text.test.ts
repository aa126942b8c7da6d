import { describe, expect, it } from "vitest";
import { decodeEntities, htmlToText } from "./html-text.js";

describe("htmlToText", () => {
  it("drops scripts, styles and comments and puts blocks on their own lines", () => {
    const html = `<!doctype html><html><head><title>The  page</title><style>p{color:red}</style>
      <script>var secret = "<p>not text</p>";</script></head><body>
      <h1>Heading</h1><p>First   paragraph
      continues.</p><!-- a comment --><noscript>enable js</noscript>
      <ul><li>one</li><li>two</li></ul><div>a<br>b</div></body></html>`;
    expect(htmlToText(html)).toBe(
      "The page\n\n# Heading\n\nFirst paragraph continues.\n\n- one\n- two\n\na\nb",
    );
  });

  it("keeps link text followed by the absolute URL, but not for anchors or javascript", () => {
    const html = `<p>Read <a href="/docs?a=1&amp;b=2">the docs</a>, <a href="#top">top</a>,
      <a href="javascript:void(0)">click</a> or <a href='https://x.test/'>https://x.test/</a>.</p>`;
    expect(htmlToText(html, "https://example.test/dir/page")).toBe(
      "Read the docs (https://example.test/docs?a=1&b=2), top, click or https://x.test/.",
    );
  });

  it("keeps words apart across inline tags and together within them", () => {
    expect(htmlToText("<p><b>bold</b> <i>it</i>alic</p><p>x</p>")).toBe("bold italic\n\nx");
  });

  it("keeps whitespace inside pre and table cells apart", () => {
    expect(htmlToText("<pre>  indented\n    more</pre><table><tr><td>a</td><td>b</td></tr></table>")).toBe(
      "indented\n    more\n\na | b",
    );
  });

  it("skips an unclosed script to the end, as a browser would", () => {
    expect(htmlToText("<p>before</p><script>never closed <p>x</p>")).toBe("before");
  });
});

describe("decodeEntities", () => {
  it("decodes named, decimal and hex entities and leaves unknown ones", () => {
    expect(decodeEntities("a &amp; b &lt;c&gt; &quot;d&quot; &#39;e&#x27; &euro;&nbsp;5 &madeup; &amp")).toBe(
      "a & b <c> \"d\" 'e' €\u00a05 &madeup; &",
    );
    expect(decodeEntities("&#0; &#xD800; &#x1F600;")).toBe("\uFFFD \uFFFD 😀");
  });
});
