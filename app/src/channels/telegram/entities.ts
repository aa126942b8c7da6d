/**
 * An incoming Telegram text (or caption) and its entities → Markdown for the agent. Pure functions.
 */

/** A MessageEntity as Telegram sends it; offset and length count UTF-16 code units (JS string indices). */
export interface TelegramEntity {
  type: string;
  offset: number;
  length: number;
  url?: string;
  language?: string;
}

interface Span {
  start: number;
  end: number;
  open: string;
  close: string;
  /** Blockquote: every line inside gets a "> " prefix. */
  quote: boolean;
}

/** Moves an index off the middle of a surrogate pair, so markers never split a character. */
function snap(text: string, index: number, direction: -1 | 1): number {
  const code = text.charCodeAt(index);
  const isLowHalf = code >= 0xdc00 && code <= 0xdfff;
  const previous = text.charCodeAt(index - 1);
  return isLowHalf && previous >= 0xd800 && previous <= 0xdbff ? index + (direction === 1 ? 1 : -1) : index;
}

/** Markdown emphasis must hug its text (`** bold**` is not bold): whitespace at the edges moves out. */
function hug(text: string, start: number, end: number): [number, number] {
  while (start < end && /\s/.test(text[start] ?? "")) start++;
  while (end > start && /\s/.test(text[end - 1] ?? "")) end--;
  return [start, end];
}

function longestRun(text: string, char: string): number {
  let longest = 0;
  let run = 0;
  for (const c of text) {
    run = c === char ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  return longest;
}

function emphasis(text: string, start: number, end: number, open: string, close = open): Span[] {
  const [from, to] = hug(text, start, end);
  return from < to ? [{ start: from, end: to, open, close, quote: false }] : [];
}

function codeSpan(text: string, start: number, end: number): Span {
  const content = text.slice(start, end);
  const fence = "`".repeat(longestRun(content, "`") + 1);
  const pad = content.startsWith("`") || content.endsWith("`") ? " " : "";
  return { start, end, open: fence + pad, close: pad + fence, quote: false };
}

function preBlock(text: string, start: number, end: number, language: string | undefined): Span {
  const content = text.slice(start, end);
  const fence = "`".repeat(Math.max(3, longestRun(content, "`") + 1));
  const lang = (language ?? "").replace(/[\s`]/g, "");
  const before = start > 0 && text[start - 1] !== "\n" ? "\n" : "";
  const after = end < text.length && text[end] !== "\n" ? "\n" : "";
  const lastNewline = content.endsWith("\n") ? "" : "\n";
  return {
    start,
    end,
    open: `${before}${fence}${lang}\n`,
    close: `${lastNewline}${fence}${after}`,
    quote: false,
  };
}

function quoteBlock(text: string, start: number, end: number): Span {
  const before = start > 0 && text[start - 1] !== "\n" ? "\n" : "";
  // A blank line ends the quote; otherwise Markdown would continue it lazily into the next line.
  const after = end >= text.length ? "" : text[end] === "\n" ? "\n" : "\n\n";
  return { start, end, open: `${before}> `, close: after, quote: true };
}

function linkTarget(url: string): string {
  return /[\s()]/.test(url) ? `<${url}>` : url;
}

/**
 * Underline has no Markdown (`__x__` means bold), so it stays plain text, as do mentions, URLs,
 * hashtags, commands, e-mail addresses, phone numbers and custom emoji, whose text says it all.
 */
function toSpans(text: string, entity: TelegramEntity): Span[] {
  const start = snap(text, Math.max(0, entity.offset), -1);
  const end = snap(text, Math.min(text.length, entity.offset + entity.length), 1);
  if (end <= start) return [];
  switch (entity.type) {
    case "bold":
      return emphasis(text, start, end, "**");
    case "italic":
      return emphasis(text, start, end, "_");
    case "strikethrough":
      return emphasis(text, start, end, "~~");
    case "spoiler":
      return emphasis(text, start, end, "<spoiler>", "</spoiler>");
    case "code":
      return [codeSpan(text, start, end)];
    case "pre":
      return [preBlock(text, start, end, entity.language)];
    case "text_link":
      return entity.url
        ? [{ start, end, open: "[", close: `](${linkTarget(entity.url)})`, quote: false }]
        : [];
    case "blockquote":
    case "expandable_blockquote":
      return [quoteBlock(text, start, end)];
    default:
      return [];
  }
}

/**
 * Turns a message's text (or caption) and its entities into Markdown. Text outside entities is not
 * escaped: the result is read by the model, not rendered, and escaping would only add noise.
 * Entities are applied as nested markers; if two ever overlap without nesting, the inner ones are
 * closed and reopened around the boundary so the markers still pair up.
 */
export function telegramEntitiesToMarkdown(text: string, entities: TelegramEntity[] | undefined): string {
  const spans = (entities ?? [])
    .flatMap((entity) => toSpans(text, entity))
    .sort((a, b) => a.start - b.start || b.end - a.end);
  const open: Span[] = [];
  let markdown = "";
  let next = 0;
  for (let position = 0; position <= text.length; position++) {
    markdown += closeSpans(open, position);
    for (let span = spans[next]; span && span.start === position; span = spans[++next]) {
      markdown += span.open;
      open.push(span);
    }
    const char = text[position];
    if (char === undefined) break;
    const quote = open.findLast((span) => span.quote);
    markdown += char === "\n" && quote && position + 1 < quote.end ? "\n> " : char;
  }
  return markdown;
}

/** Closes the spans that end at `position` (and any opened after them, which are then reopened). */
function closeSpans(open: Span[], position: number): string {
  const lowest = open.findIndex((span) => span.end <= position);
  if (lowest < 0) return "";
  let markers = "";
  const reopen: Span[] = [];
  while (open.length > lowest) {
    const span = open.pop();
    if (!span) break;
    markers += span.close;
    if (span.end > position) reopen.unshift(span);
  }
  for (const span of reopen) {
    markers += span.open;
    open.push(span);
  }
  return markers;
}
