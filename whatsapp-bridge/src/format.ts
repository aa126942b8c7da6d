import { Lexer, type Token, type Tokens } from "marked";

/**
 * Markdown → WhatsApp's formatting: `*bold*`, `_italic_`, `~strike~`, `` `code` `` and
 * ```` ``` ```` blocks; headings become bold lines, links "text (url)", lists keep their markers,
 * quotes keep `> `. Whatever WhatsApp has no form for is left as its text.
 */
export function markdownToWhatsApp(markdown: string): string {
  const tokens = new Lexer({ gfm: true }).lex(markdown);
  return blocks(tokens)
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

function blocks(tokens: readonly Token[]): string {
  const parts: string[] = [];
  for (const token of tokens) {
    const text = block(token);
    if (text !== undefined) parts.push(text);
  }
  return parts.join("\n\n");
}

function block(token: Token): string | undefined {
  switch (token.type) {
    case "space":
      return undefined;
    case "heading":
      return wrap("*", inline((token as Tokens.Heading).tokens));
    case "paragraph":
      return inline((token as Tokens.Paragraph).tokens);
    case "code":
      return "```\n" + (token as Tokens.Code).text + "\n```";
    case "blockquote":
      return blocks((token as Tokens.Blockquote).tokens)
        .split("\n")
        .map((line) => `> ${line}`)
        .join("\n");
    case "list": {
      const list = token as Tokens.List;
      const start = typeof list.start === "number" ? list.start : 1;
      return list.items
        .map((item, index) => {
          const marker = list.ordered ? `${start + index}. ` : "- ";
          const body = blocks(item.tokens).replace(/\n\n/g, "\n");
          return marker + body.split("\n").join("\n   ");
        })
        .join("\n");
    }
    case "hr":
      return "———";
    case "table": {
      const table = token as Tokens.Table;
      const row = (cells: Tokens.TableCell[]) => cells.map((cell) => inline(cell.tokens)).join(" | ");
      return [row(table.header), ...table.rows.map(row)].join("\n");
    }
    case "html":
      return (token as Tokens.HTML).text.trim();
    default:
      return "tokens" in token && Array.isArray(token.tokens) ? inline(token.tokens) : token.raw;
  }
}

function inline(tokens: readonly Token[] | undefined): string {
  if (!tokens) return "";
  return tokens.map(inlineOne).join("");
}

function inlineOne(token: Token): string {
  switch (token.type) {
    case "strong":
      return wrap("*", inline((token as Tokens.Strong).tokens));
    case "em":
      return wrap("_", inline((token as Tokens.Em).tokens));
    case "del":
      return wrap("~", inline((token as Tokens.Del).tokens));
    case "codespan":
      return "`" + (token as Tokens.Codespan).text + "`";
    case "br":
      return "\n";
    case "link": {
      const link = token as Tokens.Link;
      const text = inline(link.tokens);
      return text === link.href || text === "" ? link.href : `${text} (${link.href})`;
    }
    case "image": {
      const image = token as Tokens.Image;
      return image.text ? `${image.text} (${image.href})` : image.href;
    }
    case "text": {
      const text = token as Tokens.Text;
      return text.tokens ? inline(text.tokens) : decodeEntities(text.text);
    }
    case "escape":
      return (token as Tokens.Escape).text;
    default:
      return decodeEntities(token.raw);
  }
}

/** A marker around text, outside its surrounding spaces (WhatsApp ignores `* bold*`). */
function wrap(marker: string, text: string): string {
  const match = /^(\s*)([\s\S]*?)(\s*)$/.exec(text);
  if (!match || match[2] === "") return text;
  return `${match[1]}${marker}${match[2]}${marker}${match[3]}`;
}

function decodeEntities(text: string): string {
  return text
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

/**
 * WhatsApp's formatting → Markdown, for what people write: `*bold*` → `**bold**`, `_italic_` →
 * `*italic*`, `~strike~` → `~~strike~~`; code is left as it is (the same in both).
 */
export function whatsAppToMarkdown(text: string): string {
  return text
    .replace(/(^|[\s(])\*(\S(?:[^*\n]*\S)?)\*(?=$|[\s.,;:!?)])/gm, "$1**$2**")
    .replace(/(^|[\s(])_(\S(?:[^_\n]*\S)?)_(?=$|[\s.,;:!?)])/gm, "$1*$2*")
    .replace(/(^|[\s(])~(\S(?:[^~\n]*\S)?)~(?=$|[\s.,;:!?)])/gm, "$1~~$2~~");
}
