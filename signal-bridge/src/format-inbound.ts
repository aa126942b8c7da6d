/**
 * Signal -> Markdown for inbound messages, so the assistant sees the user's formatting.
 *
 * signal-cli reports styles in `envelope.dataMessage.textStyles` as `{style, start, length}`
 * (src/.../json/JsonTextStyle.java in AsamK/signal-cli), counted in UTF-16 code units like every
 * Signal body range (signal-cli issue #1504). Markdown needs properly nested markers that hug
 * non-space text, while Signal ranges may overlap freely and include spaces, so the text is cut
 * into runs with a constant set of styles and markers are opened and closed between runs.
 */
import { isSignalStyle, signalStyles, type SignalStyle } from "./format-ranges.js";

/** A style as it arrives from signal-cli; `style` may be one this code does not know. */
export interface InboundTextStyle {
  start: number;
  length: number;
  style: string;
}

/** A style over `[start, end)`, clamped to the text. */
interface Span {
  start: number;
  end: number;
  style: SignalStyle;
}

/** A stretch of text with one set of styles: either code (MONOSPACE) or text under `styles`, outermost first. */
interface Run {
  text: string;
  code: Span | undefined;
  styles: Span[];
}

/** Styles written as Markdown delimiter runs, which only work when they touch non-space characters. */
const delimiterStyles = new Set<SignalStyle>(["BOLD", "ITALIC", "STRIKETHROUGH"]);

/** Renders Signal text plus its style ranges as Markdown. Bad ranges are clamped or dropped; never throws. */
export function signalToMarkdown(text: string, styles: InboundTextStyle[] | undefined): string {
  const spans = normaliseSpans(text, Array.isArray(styles) ? styles : []);
  if (spans.length === 0) return text;
  return emitMarkdown(text, splitIntoRuns(text, spans));
}

function normaliseSpans(text: string, styles: InboundTextStyle[]): Span[] {
  const spans: Span[] = [];
  for (const raw of styles) {
    const style = typeof raw?.style === "string" ? raw.style.toUpperCase() : "";
    if (!isSignalStyle(style) || !Number.isFinite(raw.start) || !Number.isFinite(raw.length)) continue;
    const start = clamp(Math.floor(raw.start), 0, text.length);
    const end = clamp(Math.floor(raw.start) + Math.floor(raw.length), start, text.length);
    const span = trimSpan(text, { start: widenStart(text, start), end: widenEnd(text, end), style });
    if (span.end > span.start) spans.push(span);
  }
  return signalStyles.flatMap((style) => mergeOverlapping(spans.filter((span) => span.style === style)));
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(value, min), max);
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number): boolean => code >= 0xdc00 && code <= 0xdfff;

/** Moves an offset that falls inside a surrogate pair (an emoji) to before the pair, so no marker splits it. */
function widenStart(text: string, offset: number): number {
  const splitsPair = isLowSurrogate(text.charCodeAt(offset)) && isHighSurrogate(text.charCodeAt(offset - 1));
  return splitsPair ? offset - 1 : offset;
}

function widenEnd(text: string, offset: number): number {
  const splitsPair = isLowSurrogate(text.charCodeAt(offset)) && isHighSurrogate(text.charCodeAt(offset - 1));
  return splitsPair ? offset + 1 : offset;
}

/** `** bold **` is not bold in Markdown, so delimiter styles drop surrounding whitespace. */
function trimSpan(text: string, span: Span): Span {
  if (!delimiterStyles.has(span.style)) return span;
  let { start, end } = span;
  while (start < end && /\s/.test(text.charAt(start))) start++;
  while (end > start && /\s/.test(text.charAt(end - 1))) end--;
  return { ...span, start, end };
}

/** Joins overlapping or touching ranges of one style, which Signal allows but Markdown cannot express. */
function mergeOverlapping(spans: Span[]): Span[] {
  const merged: Span[] = [];
  for (const span of [...spans].sort((a, b) => a.start - b.start)) {
    const last = merged.at(-1);
    if (last && span.start <= last.end) last.end = Math.max(last.end, span.end);
    else merged.push({ ...span });
  }
  return merged;
}

/** Sweeps the range boundaries once, producing runs whose active styles do not change inside. */
function splitIntoRuns(text: string, spans: Span[]): Run[] {
  const boundaries = [...new Set([0, text.length, ...spans.flatMap((span) => [span.start, span.end])])].sort(
    (a, b) => a - b,
  );
  const starting = groupBy(spans, (span) => span.start);
  const ending = groupBy(spans, (span) => span.end);
  const active = new Set<Span>();
  const runs: Run[] = [];
  for (let index = 0; index + 1 < boundaries.length; index++) {
    const from = boundaries[index] ?? 0;
    const to = boundaries[index + 1] ?? from;
    for (const span of ending.get(from) ?? []) active.delete(span);
    for (const span of starting.get(from) ?? []) active.add(span);
    const run = describeRun(text.slice(from, to), active);
    const previous = runs.at(-1);
    if (previous && sameStyling(previous, run)) previous.text += run.text;
    else runs.push(run);
  }
  return runs;
}

function groupBy(spans: Span[], key: (span: Span) => number): Map<number, Span[]> {
  const groups = new Map<number, Span[]>();
  for (const span of spans) groups.set(key(span), [...(groups.get(key(span)) ?? []), span]);
  return groups;
}

/**
 * Code is literal in Markdown, so inside MONOSPACE every other style is suspended (closed before the
 * code and reopened after). Delimiter styles are also suspended over whitespace-only stretches.
 */
function describeRun(text: string, active: Set<Span>): Run {
  const spans = [...active];
  const code = spans.find((span) => span.style === "MONOSPACE");
  if (code) return { text, code, styles: [] };
  const blank = text.trim() === "";
  const styles = spans
    .filter((span) => !(blank && delimiterStyles.has(span.style)))
    .sort(
      (a, b) =>
        b.end - a.end || a.start - b.start || signalStyles.indexOf(a.style) - signalStyles.indexOf(b.style),
    );
  return { text, code: undefined, styles };
}

function sameStyling(a: Run, b: Run): boolean {
  return (
    a.code === b.code && a.styles.length === b.styles.length && a.styles.every((s, i) => s === b.styles[i])
  );
}

/** Emits runs, keeping a stack of open styles; the longest-lasting style is outermost so it rarely reopens. */
function emitMarkdown(text: string, runs: Run[]): string {
  const out: string[] = [];
  const open: Span[] = [];
  runs.forEach((run, index) => {
    let keep = 0;
    while (keep < open.length && keep < run.styles.length && open[keep] === run.styles[keep]) keep++;
    closeStyles(out, open.splice(keep).reverse(), text);
    let body = run.text;
    const opening = run.styles.slice(keep);
    if (opening.length > 0) {
      const lead = body.length - body.trimStart().length;
      out.push(body.slice(0, lead), ...opening.map((span) => marker(span, text, "open")));
      body = body.slice(lead);
      open.push(...opening);
    }
    if (run.code) out.push(codeMarkdown(body, atLineStart(out), runs[index + 1]?.text));
    else out.push(body);
  });
  closeStyles(out, open.reverse(), text);
  return out.join("");
}

/** Whether the Markdown written so far is empty or ends a line (where a code fence may start). */
function atLineStart(out: string[]): boolean {
  const last = out.findLast((part) => part !== "");
  return last === undefined || last.endsWith("\n");
}

/** Writes closing markers, moving whitespace that precedes them to after them (`**a **` -> `**a** `). */
function closeStyles(out: string[], closing: Span[], text: string): void {
  if (closing.length === 0) return;
  const last = out.pop() ?? "";
  const kept = last.trimEnd();
  out.push(kept, ...closing.map((span) => marker(span, text, "close")), last.slice(kept.length));
}

function marker(span: Span, text: string, side: "open" | "close"): string {
  switch (span.style) {
    case "BOLD":
      return "**";
    case "STRIKETHROUGH":
      return "~~";
    case "SPOILER":
      return side === "open" ? "<spoiler>" : "</spoiler>";
    case "ITALIC":
      return italicMarker(span, text);
    case "MONOSPACE":
      return "`";
  }
}

/** `_` cannot emphasise part of a word in CommonMark (`foo_bar_`), so italics inside words use `*`. */
function italicMarker(span: Span, text: string): string {
  const wordChar = /[\p{L}\p{N}]/u;
  const inWord = wordChar.test(text.charAt(span.start - 1)) || wordChar.test(text.charAt(span.end));
  return inWord ? "*" : "_";
}

/**
 * Inline code gets a backtick fence longer than any backtick run inside it; code spanning lines
 * becomes a fenced block on its own lines.
 */
function codeMarkdown(code: string, lineStart: boolean, after: string | undefined): string {
  const longestTicks = (code.match(/`+/g) ?? []).reduce(
    (longest, ticks) => Math.max(longest, ticks.length),
    0,
  );
  if (!code.includes("\n")) {
    const fence = "`".repeat(longestTicks + 1);
    const pad = code.startsWith("`") || code.endsWith("`") || (/^ .* $/s.test(code) && code.trim() !== "");
    return pad ? `${fence} ${code} ${fence}` : `${fence}${code}${fence}`;
  }
  const fence = "`".repeat(Math.max(3, longestTicks + 1));
  const lineBefore = lineStart ? "" : "\n";
  const lineAfter = after === undefined || after.startsWith("\n") ? "" : "\n";
  const body = code.endsWith("\n") ? code : `${code}\n`;
  return `${lineBefore}${fence}\n${body}${fence}${lineAfter}`;
}
