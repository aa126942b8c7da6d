import { escapeHtml } from "../../html.js";
import { Lexer } from "marked";
import type { MarkedToken, Token, Tokens } from "marked";

/**
 * The agent's Markdown → the small HTML subset Telegram accepts with `parse_mode: "HTML"`.
 * Pure functions.
 */

export { escapeHtml };

/** What a Telegram client shows for our HTML: tags dropped, entities decoded (for a plain-text resend). */
export function htmlToPlainText(html: string): string {
  return html
    .replace(/<[^>]*>/g, "")
    .replace(/&#(\d+);/g, (_, code: string) => String.fromCodePoint(Number(code)))
    .replace(/&(lt|gt|quot|amp);/g, (_, name: string) => NAMED_REFERENCES[name] ?? "");
}

function escapeAttribute(text: string): string {
  return escapeHtml(text).replace(/"/g, "&quot;");
}

/** Only these schemes become links; anything else (javascript:, data:, relative paths) stays text. */
const SAFE_LINK = /^(?:https?|tg|mailto):/i;
const HORIZONTAL_RULE = "———";

/**
 * marked resolves numeric character references but leaves named ones (`&amp;`) in text tokens for
 * its own HTML renderer. We escape every text node, so decode the common ones first; any other
 * named reference is shown literally.
 */
const NAMED_REFERENCES: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: "\u00a0",
};

function decodeNamedReferences(text: string): string {
  return text.replace(/&(amp|lt|gt|quot|apos|nbsp);/g, (_, name: string) => NAMED_REFERENCES[name] ?? "");
}

interface RenderContext {
  /** Telegram forbids code and nested links inside a link: they render as plain text there. */
  inLink: boolean;
  /** Telegram forbids nested blockquotes: an inner quote renders its content only. */
  inQuote: boolean;
}

const ROOT: RenderContext = { inLink: false, inQuote: false };

/** Converts Markdown to the HTML subset Telegram accepts; raw HTML in the input is shown, not obeyed. */
export function markdownToTelegramHtml(markdown: string): string {
  // A fresh options object keeps us independent of any global marked.use() elsewhere in the app.
  const tokens = new Lexer({ gfm: true }).lex(markdown);
  return renderBlocks(tokens, ROOT, "\n\n").trim();
}

function wrap(tag: string, inner: string, attributes = ""): string {
  return inner === "" ? "" : `<${tag}${attributes}>${inner}</${tag}>`;
}

function renderBlocks(tokens: Token[], ctx: RenderContext, separator: string): string {
  return tokens
    .map((token) => renderBlock(token, ctx))
    .filter((html) => html !== "")
    .join(separator);
}

function renderBlock(token: Token, ctx: RenderContext): string {
  const t = token as MarkedToken;
  switch (t.type) {
    case "paragraph":
      return renderInline(t.tokens, ctx);
    case "text":
      return t.tokens ? renderInline(t.tokens, ctx) : escapeHtml(decodeNamedReferences(t.text));
    case "heading":
      return wrap("b", renderInline(t.tokens, ctx));
    case "code":
      return renderCode(t);
    case "blockquote": {
      const inner = renderBlocks(t.tokens, { ...ctx, inQuote: true }, "\n\n");
      return ctx.inQuote ? inner : wrap("blockquote", inner);
    }
    case "list":
      return renderList(t, ctx);
    case "table":
      return renderTable(t);
    case "hr":
      return HORIZONTAL_RULE;
    case "html":
      return escapeHtml(t.text.trimEnd());
    case "checkbox":
      return t.checked ? "☑" : "☐";
    case "space":
    case "def":
      return "";
    default:
      return renderInlineToken(token, ctx);
  }
}

function renderCode(code: Tokens.Code): string {
  const text = escapeHtml(code.text);
  if (text === "") return "";
  const language = code.lang
    ?.trim()
    .split(/\s+/)[0]
    ?.replace(/[^\w+#.-]/g, "");
  if (!language) return `<pre>${text}</pre>`;
  return `<pre><code class="language-${escapeAttribute(language)}">${text}</code></pre>`;
}

/** Bullets and numbers as text; continuation lines (and nested lists) are indented under the item. */
function renderList(list: Tokens.List, ctx: RenderContext): string {
  const first = typeof list.start === "number" ? list.start : 1;
  return list.items
    .map((item, index) => {
      const marker = list.ordered ? `${first + index}. ` : "• ";
      const body = renderListItem(item, ctx);
      return marker + body.replace(/\n(?=[^\n])/g, `\n${" ".repeat(marker.length)}`);
    })
    .join("\n");
}

function renderListItem(item: Tokens.ListItem, ctx: RenderContext): string {
  const [head, ...rest] = item.tokens;
  if (head?.type === "checkbox") return `${renderBlock(head, ctx)} ${renderBlocks(rest, ctx, "\n")}`;
  return renderBlocks(item.tokens, ctx, "\n");
}

/** Tables become aligned monospace text: Telegram has no table markup, and cell text must survive. */
function renderTable(table: Tokens.Table): string {
  const rows = [table.header, ...table.rows].map((cells) => cells.map((cell) => plainText(cell.tokens)));
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, Array.from(cell).length)));
  }
  const pad = (cell: string, i: number): string =>
    cell + " ".repeat((widths[i] ?? 0) - Array.from(cell).length);
  const lines = rows.map((row) => row.map(pad).join(" | ").trimEnd());
  lines.splice(1, 0, widths.map((width) => "-".repeat(width)).join("-+-"));
  return `<pre>${escapeHtml(lines.join("\n"))}</pre>`;
}

/** The visible text of inline tokens, without any markup. */
function plainText(tokens: Token[] | undefined): string {
  let text = "";
  for (const token of tokens ?? []) {
    const t = token as MarkedToken;
    if (t.type === "image") text += t.text || t.href;
    else if (t.type === "br") text += " ";
    else if (t.type === "text") text += t.tokens ? plainText(t.tokens) : decodeNamedReferences(t.text);
    else if ("tokens" in t && t.tokens) text += plainText(t.tokens);
    else if ("text" in t) text += t.text;
  }
  return text;
}

/**
 * Renders inline tokens. `<spoiler>…</spoiler>` (how we write spoilers in Markdown) becomes
 * `<tg-spoiler>`, but only when both ends are siblings in this token list; a spoiler still open at
 * the end of the list is closed there, so the output can never be mis-nested.
 */
function renderInline(tokens: Token[] | undefined, ctx: RenderContext): string {
  let html = "";
  let openSpoilers = 0;
  for (const token of tokens ?? []) {
    const tag = token.type === "html" ? String(token.text).trim().toLowerCase() : "";
    if (tag === "<spoiler>") {
      html += "<tg-spoiler>";
      openSpoilers++;
    } else if (tag === "</spoiler>" && openSpoilers > 0) {
      html += "</tg-spoiler>";
      openSpoilers--;
    } else {
      html += renderInlineToken(token, ctx);
    }
  }
  return html + "</tg-spoiler>".repeat(openSpoilers);
}

function renderInlineToken(token: Token, ctx: RenderContext): string {
  const t = token as MarkedToken;
  switch (t.type) {
    case "text":
      return t.tokens ? renderInline(t.tokens, ctx) : escapeHtml(decodeNamedReferences(t.text));
    case "escape":
      return escapeHtml(t.text);
    case "strong":
      return wrap("b", renderInline(t.tokens, ctx));
    case "em":
      return wrap("i", renderInline(t.tokens, ctx));
    case "del":
      return wrap("s", renderInline(t.tokens, ctx));
    case "codespan":
      return ctx.inLink ? escapeHtml(t.text) : wrap("code", escapeHtml(t.text));
    case "br":
      return "\n";
    case "link":
      return renderLink(t, ctx);
    case "image":
      return escapeHtml(t.text || t.href);
    case "html":
      return escapeHtml(t.text);
    default:
      // Block tokens never reach here; an unknown extension token keeps its source text.
      return escapeHtml(token.raw);
  }
}

function renderLink(link: Tokens.Link, ctx: RenderContext): string {
  // Autolinks (bare URLs, <…>) carry literal text: character references are not resolved in them.
  const text = link.autolink ? escapeHtml(link.text) : renderInline(link.tokens, { ...ctx, inLink: true });
  const href = link.href.trim();
  if (ctx.inLink || !SAFE_LINK.test(href)) return text;
  return `<a href="${escapeAttribute(href)}">${text || escapeHtml(href)}</a>`;
}
