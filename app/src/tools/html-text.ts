/**
 * HTML to readable plain text for a model to read: scripts, styles and other non-content elements
 * dropped, block elements on their own lines, links kept as their text followed by the URL,
 * entities decoded, whitespace collapsed. A small tokenizer, not a full HTML parser: it is
 * enough for reading, and the app takes no dependency for it.
 */

/** Elements whose content is never text for a reader. */
const SKIPPED = new Set([
  "script",
  "style",
  "noscript",
  "template",
  "svg",
  "math",
  "iframe",
  "object",
  "canvas",
]);
/** Elements that start and end a line. */
const BLOCKS = new Set(
  (
    "address article aside blockquote body dd details dialog div dl dt fieldset figcaption figure footer " +
    "form header hgroup li main nav ol p pre section summary table tbody thead tfoot title tr ul"
  ).split(" "),
);
/** Elements after which a blank line reads better. */
const PARAGRAPHS = new Set(["p", "title", "table", "ul", "ol", "blockquote", "pre", "section", "article"]);

const TOKEN =
  /<!--[\s\S]*?(?:-->|$)|<![^>]*>|<\?[^>]*>|<(\/?)([a-zA-Z][a-zA-Z0-9:-]*)((?:"[^"]*"|'[^']*'|[^'">])*)>|[^<]+|</g;

export function htmlToText(html: string, baseUrl?: string): string {
  const out = new TextBuilder();
  const links: { href: string | undefined; parts: number }[] = [];
  let pre = 0;
  const tokens = new RegExp(TOKEN.source, "g");
  for (let token = tokens.exec(html); token; token = tokens.exec(html)) {
    const [whole, slash, rawName, attributes = ""] = token;
    if (rawName === undefined) {
      if (!whole.startsWith("<") || whole === "<") out.text(decodeEntities(whole), pre > 0);
      continue;
    }
    const name = rawName.toLowerCase();
    const closing = slash === "/";
    if (!closing && SKIPPED.has(name) && !attributes.trimEnd().endsWith("/")) {
      // Raw text up to the matching close tag (or the end, as a browser would).
      const close = new RegExp(`</${name}(?=[\\s/>])[^>]*>`, "gi");
      close.lastIndex = tokens.lastIndex;
      tokens.lastIndex = close.exec(html) ? close.lastIndex : html.length;
      continue;
    }
    if (name === "br") out.lineBreak();
    else if (name === "hr") out.breakLines(2);
    else if (/^h[1-6]$/.test(name)) {
      out.breakLines(2);
      if (!closing) out.text(`${"#".repeat(Number(name[1]))} `, false);
    } else if (name === "li" && !closing) {
      out.breakLines(1);
      out.text("- ", false);
    } else if ((name === "td" || name === "th") && !closing) {
      if (!out.atLineStart) out.text(" | ", false);
    } else if (name === "a") {
      if (!closing) links.push({ href: linkTarget(attributes, baseUrl), parts: out.size });
      else {
        const link = links.pop();
        if (link?.href && out.hasTextSince(link.parts) && !out.endsWith(link.href))
          out.text(` (${link.href})`, false);
      }
    } else if (BLOCKS.has(name)) {
      if (name === "pre") pre = Math.max(0, pre + (closing ? -1 : 1));
      out.breakLines(closing && PARAGRAPHS.has(name) ? 2 : 1);
    }
  }
  return out.toString();
}

/** The absolute http(s) URL of an `<a href>`, or undefined for anchors, scripts and mail links. */
function linkTarget(attributes: string, baseUrl: string | undefined): string | undefined {
  const match = /(?:^|\s)href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/i.exec(attributes);
  const href = decodeEntities(match?.[1] ?? match?.[2] ?? match?.[3] ?? "").trim();
  if (!href || href.startsWith("#")) return undefined;
  try {
    const url = new URL(href, baseUrl);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** Collects output, keeping at most one space between words and at most one blank line. */
class TextBuilder {
  private readonly parts: string[] = [];
  /** Newlines at the end of the output; starting at 2 means no leading blank lines. */
  private newlines = 2;
  private space = false;

  get atLineStart(): boolean {
    return this.newlines > 0;
  }

  get size(): number {
    return this.parts.length;
  }

  text(text: string, preformatted: boolean): void {
    if (preformatted) {
      if (!text) return;
      this.parts.push(text);
      this.space = false;
      this.newlines = text.endsWith("\n") ? Math.min(2, /\n+$/.exec(text)?.[0].length ?? 0) : 0;
      return;
    }
    const words = text.replace(/\s+/g, " ");
    const trimmed = words.trim();
    if (!trimmed) {
      this.space ||= words.length > 0 && this.newlines === 0;
      return;
    }
    if ((this.space || words.startsWith(" ")) && this.newlines === 0) this.parts.push(" ");
    this.parts.push(trimmed);
    this.newlines = 0;
    this.space = words.endsWith(" ");
  }

  breakLines(count: 1 | 2): void {
    this.space = false;
    while (this.newlines < count) {
      this.parts.push("\n");
      this.newlines++;
    }
  }

  lineBreak(): void {
    this.space = false;
    if (this.newlines < 2) {
      this.parts.push("\n");
      this.newlines++;
    }
  }

  hasTextSince(index: number): boolean {
    return this.parts.slice(index).some((part) => part.trim() !== "");
  }

  endsWith(text: string): boolean {
    return this.parts.at(-1)?.endsWith(text) ?? false;
  }

  toString(): string {
    return this.parts
      .join("")
      .split("\n")
      .map((line) => line.trimEnd())
      .join("\n")
      .trim();
  }
}

// prettier-ignore
const NAMED: Record<string, string> = {
  amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0", shy: "", ensp: " ", emsp: " ",
  thinsp: " ", ndash: "–", mdash: "—", hellip: "…", lsquo: "‘", rsquo: "’", sbquo: "‚", ldquo: "“",
  rdquo: "”", bdquo: "„", laquo: "«", raquo: "»", lsaquo: "‹", rsaquo: "›", bull: "•", middot: "·",
  copy: "©", reg: "®", trade: "™", deg: "°", plusmn: "±", times: "×", divide: "÷", minus: "−", euro: "€",
  pound: "£", yen: "¥", cent: "¢", sect: "§", para: "¶", dagger: "†", larr: "←", rarr: "→", uarr: "↑",
  darr: "↓", harr: "↔", frac12: "½", frac14: "¼", frac34: "¾", iexcl: "¡", iquest: "¿", szlig: "ß",
  auml: "ä", ouml: "ö", uuml: "ü", Auml: "Ä", Ouml: "Ö", Uuml: "Ü", eacute: "é", egrave: "è", ecirc: "ê",
  aacute: "á", agrave: "à", acirc: "â", ccedil: "ç", iacute: "í", oacute: "ó", uacute: "ú", ntilde: "ñ",
  Eacute: "É", zwj: "", zwnj: "",
};
/** Named entities browsers also accept without the semicolon. */
const LEGACY = new Set(["amp", "lt", "gt", "quot", "nbsp", "copy", "reg"]);

export function decodeEntities(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(
    /&(?:#(\d{1,8})|#[xX]([0-9a-fA-F]{1,7})|([a-zA-Z][a-zA-Z0-9]{1,31}))(;?)/g,
    (whole, decimal?: string, hex?: string, name?: string, semicolon?: string) => {
      if (name !== undefined) {
        const value = NAMED[name];
        return value !== undefined && (semicolon || LEGACY.has(name)) ? value : whole;
      }
      const code = decimal !== undefined ? Number(decimal) : parseInt(hex ?? "", 16);
      const valid = code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
      return valid ? String.fromCodePoint(code) : "\uFFFD";
    },
  );
}
