/**
 * Markdown -> Signal formatting for outbound messages.
 *
 * Signal does not render Markdown; it takes plain text plus "body ranges". signal-cli's JSON-RPC `send`
 * accepts them as `textStyle: ["start:length:STYLE"]` (SendCommand.parseTextStyles, regex
 * `(\d+):(\d+):(.+)`, STYLE one of NONE/BOLD/ITALIC/SPOILER/STRIKETHROUGH/MONOSPACE per
 * lib/.../manager/api/TextStyle.java in AsamK/signal-cli). `start` and `length` count UTF-16 code
 * units (signal-cli issue #1504 and PR #1505, "Document the unit of start and length"), which is exactly
 * what JavaScript's `String.length` counts, so offsets below are plain string indices.
 *
 * The inverse direction (inbound `textStyles` -> Markdown) lives in format-inbound.ts.
 */
import { Lexer } from "marked";
import type { Token, Tokens } from "marked";
import { toTextStyleStrings, type SignalStyle, type StyleRange } from "./format-ranges.js";

export { signalToMarkdown } from "./format-inbound.js";
export type { SignalStyle, StyleRange } from "./format-ranges.js";

/** What the bridge hands to signal-cli's `send`: the text and its `start:length:STYLE` ranges. */
export interface SignalText {
  text: string;
  textStyle: string[];
}

/**
 * Converts the assistant's Markdown into Signal plain text plus text-style ranges. Never throws: input
 * that defeats the parser (marked overflows the stack on a few thousand nested `>` or `-`) is sent as
 * its raw text, because an unformatted reply is better than a lost one.
 */
export function markdownToSignal(markdown: string): SignalText {
  try {
    const writer = new StyledTextWriter();
    renderBlocks(writer, Lexer.lex(markdown), "\n\n");
    const { text, ranges } = writer.finish();
    return { text, textStyle: toTextStyleStrings(ranges) };
  } catch {
    return { text: markdown.trimEnd(), textStyle: [] };
  }
}

/** A line prefix (blockquote marker, list marker/indent) that differs on the first line of its block. */
interface LinePrefix {
  first: string;
  rest: string;
  used: boolean;
}

/**
 * Accumulates output text and style ranges. Line prefixes are written lazily when a line gets its first
 * character, so nested quotes and lists compose without the renderers knowing about each other. Text is
 * kept as parts so that trimming a line's trailing spaces never re-copies the whole output.
 */
class StyledTextWriter {
  private readonly parts: string[] = [];
  private length = 0;
  private readonly ranges: StyleRange[] = [];
  private readonly prefixes: LinePrefix[] = [];
  private atLineStart = true;
  /** Ranges from this index on were closed on the current line, so only they can end in its trailing spaces. */
  private lineFirstRange = 0;
  private verbatimDepth = 0;

  write(chunk: string): void {
    const lines = chunk.split("\n");
    lines.forEach((line, index) => {
      if (index > 0) this.newline();
      if (line === "") return;
      this.startLine();
      this.append(line);
    });
  }

  /** Ends the current line without trailing spaces (except inside code); an empty line keeps its `>`. */
  newline(): void {
    if (this.atLineStart) this.append(this.takePrefix().trimEnd());
    else if (this.verbatimDepth === 0) this.trimLineEnd();
    this.append("\n");
    this.atLineStart = true;
    this.lineFirstRange = this.ranges.length;
  }

  /** Writes the pending line prefix, so a style that opens here does not swallow it. */
  startLine(): void {
    if (!this.atLineStart) return;
    this.append(this.takePrefix());
    this.atLineStart = false;
  }

  withPrefix(first: string, rest: string, render: () => void): void {
    const prefix: LinePrefix = { first, rest, used: false };
    this.prefixes.push(prefix);
    render();
    if (!prefix.used) this.startLine(); // an empty list item still shows its marker
    this.prefixes.pop();
  }

  styled(style: SignalStyle, render: () => void): void {
    const start = this.mark();
    render();
    this.addRange(style, start);
  }

  /** Code is monospace and verbatim: its lines keep their trailing spaces. */
  code(text: string): void {
    this.verbatimDepth++;
    this.styled("MONOSPACE", () => this.write(text));
    this.verbatimDepth--;
  }

  /** The offset where a style opened by a separate token (e.g. `<spoiler>`) begins. */
  mark(): number {
    this.startLine();
    return this.length;
  }

  addRange(style: SignalStyle, start: number): void {
    const length = this.length - start;
    if (length > 0) this.ranges.push({ start, length, style });
  }

  finish(): { text: string; ranges: StyleRange[] } {
    const text = this.parts.join("").trimEnd();
    const ranges = this.ranges
      .map((range) => ({ ...range, length: Math.min(range.start + range.length, text.length) - range.start }))
      .filter((range) => range.length > 0);
    return { text, ranges };
  }

  private append(text: string): void {
    if (text === "") return;
    this.parts.push(text);
    this.length += text.length;
  }

  private trimLineEnd(): void {
    for (let last = this.parts.at(-1); last !== undefined; last = this.parts.at(-1)) {
      const kept = last.replace(/[ \t]+$/, "");
      this.length -= last.length - kept.length;
      if (kept !== "") {
        this.parts[this.parts.length - 1] = kept;
        break;
      }
      this.parts.pop();
    }
    for (const range of this.ranges.slice(this.lineFirstRange)) {
      range.length = Math.max(0, Math.min(range.length, this.length - range.start));
    }
  }

  private takePrefix(): string {
    let prefix = "";
    for (const entry of this.prefixes) {
      prefix += entry.used ? entry.rest : entry.first;
      entry.used = true;
    }
    return prefix;
  }
}

/** Renders block tokens with `separator` between them (a blank line, or one newline in tight lists). */
function renderBlocks(writer: StyledTextWriter, tokens: Token[], separator: string): void {
  let first = true;
  for (const token of tokens) {
    if (token.type === "space" || token.type === "def") continue;
    if (!first) writer.write(separator);
    // A task list's checkbox is its own token but belongs on the same line as the item's text.
    first = token.type === "checkbox";
    renderBlock(writer, token);
  }
}

function renderBlock(writer: StyledTextWriter, token: Token): void {
  const known = token as Tokens.Generic;
  switch (token.type) {
    case "paragraph":
      renderInline(writer, (known as Tokens.Paragraph).tokens);
      return;
    case "heading":
      writer.styled("BOLD", () => renderInline(writer, (known as Tokens.Heading).tokens));
      return;
    case "code":
      writer.code((known as Tokens.Code).text);
      return;
    case "blockquote":
      writer.withPrefix("> ", "> ", () => renderBlocks(writer, (known as Tokens.Blockquote).tokens, "\n\n"));
      return;
    case "list":
      renderList(writer, known as Tokens.List);
      return;
    case "hr":
      writer.write("---");
      return;
    case "table":
      renderTable(writer, known as Tokens.Table);
      return;
    case "html":
      writer.write((known as Tokens.HTML).text.replace(/\n+$/, ""));
      return;
    default:
      renderInlineToken(writer, token);
  }
}

/** `- item` / `N. item`; nested lists and continuation lines are indented by two spaces. */
function renderList(writer: StyledTextWriter, list: Tokens.List): void {
  const first = typeof list.start === "number" ? list.start : 1;
  list.items.forEach((item, index) => {
    if (index > 0) writer.write(list.loose ? "\n\n" : "\n");
    const marker = list.ordered ? `${first + index}. ` : "- ";
    writer.withPrefix(marker, "  ", () => renderBlocks(writer, item.tokens, item.loose ? "\n\n" : "\n"));
  });
}

/** Signal has no tables: one line per row, cells separated by ` | `, inline styles kept. */
function renderTable(writer: StyledTextWriter, table: Tokens.Table): void {
  [table.header, ...table.rows].forEach((row, rowIndex) => {
    if (rowIndex > 0) writer.write("\n");
    row.forEach((cell, cellIndex) => {
      if (cellIndex > 0) writer.write(" | ");
      renderInline(writer, cell.tokens);
    });
  });
}

/** Renders inline tokens; a `<spoiler>` … `</spoiler>` pair becomes a SPOILER range, an unpaired tag stays literal. */
function renderInline(writer: StyledTextWriter, tokens: Token[]): void {
  const pairs = pairSpoilerTags(tokens);
  const openedAt = new Map<number, number>();
  tokens.forEach((token, index) => {
    const closeIndex = pairs.get(index);
    if (closeIndex !== undefined) {
      openedAt.set(closeIndex, writer.mark());
      return;
    }
    const start = openedAt.get(index);
    if (start !== undefined) {
      writer.addRange("SPOILER", start);
      return;
    }
    renderInlineToken(writer, token);
  });
}

const spoilerOpen = /^<spoiler\s*>$/i;
const spoilerClose = /^<\/spoiler\s*>$/i;

/** Maps the index of each `<spoiler>` tag token to its matching `</spoiler>`, in one pass. */
function pairSpoilerTags(tokens: Token[]): Map<number, number> {
  const pairs = new Map<number, number>();
  const open: number[] = [];
  tokens.forEach((token, index) => {
    if (token.type !== "html") return;
    const tag = (token as Tokens.Tag).text.trim();
    if (spoilerOpen.test(tag)) open.push(index);
    else if (spoilerClose.test(tag)) {
      const opener = open.pop();
      if (opener !== undefined) pairs.set(opener, index);
    }
  });
  return pairs;
}

function renderInlineToken(writer: StyledTextWriter, token: Token): void {
  const known = token as Tokens.Generic;
  switch (token.type) {
    case "strong":
      writer.styled("BOLD", () => renderInline(writer, (known as Tokens.Strong).tokens));
      return;
    case "em":
      writer.styled("ITALIC", () => renderInline(writer, (known as Tokens.Em).tokens));
      return;
    case "del":
      writer.styled("STRIKETHROUGH", () => renderInline(writer, (known as Tokens.Del).tokens));
      return;
    case "codespan":
      writer.code((known as Tokens.Codespan).text);
      return;
    case "br":
      writer.newline();
      return;
    case "link":
      renderLink(writer, known as Tokens.Link);
      return;
    case "image": {
      const image = known as Tokens.Image;
      writer.write(image.text || image.href);
      return;
    }
    case "checkbox":
      writer.write((known as Tokens.Checkbox).checked ? "[x] " : "[ ] ");
      return;
    case "escape":
    case "html":
      writer.write((known as Tokens.Escape).text);
      return;
    case "text":
      if (known.tokens) renderInline(writer, known.tokens);
      else writer.write(decodeBasicEntities((known as Tokens.Text).text));
      return;
    default:
      if (Array.isArray(known.tokens)) renderInline(writer, known.tokens);
      else writer.write(known.raw);
  }
}

/** `text (url)`, or just the text when it already is the URL (autolinks, `<a@b.c>`). */
function renderLink(writer: StyledTextWriter, link: Tokens.Link): void {
  const showsUrl = link.text === link.href || `mailto:${link.text}` === link.href;
  if (link.tokens.length === 0) {
    writer.write(link.href);
    return;
  }
  renderInline(writer, link.tokens);
  if (!showsUrl) writer.write(` (${link.href})`);
}

const basicEntities: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  "#39": "'",
  nbsp: "\u00a0",
};

/**
 * marked decodes numeric character references but leaves named ones, and re-escapes a bare `&` as
 * `&amp;` when the same text also holds a numeric one. Decoding the few XML entities (in one pass, so
 * `&amp;lt;` stays `&lt;`) keeps the plain text what the writer meant.
 */
function decodeBasicEntities(text: string): string {
  return text.replace(
    /&(amp|lt|gt|quot|apos|#39|nbsp);/g,
    (entity, name: string) => basicEntities[name] ?? entity,
  );
}
