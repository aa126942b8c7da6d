/**
 * Splitting Telegram HTML into chunks that each fit in one message and are well-formed alone.
 * Pure functions.
 */

/** Telegram's limit on a message's text, counted after entity parsing. */
export const TELEGRAM_MESSAGE_LIMIT = 4096;

interface OpenTag {
  name: string;
  /** The opening tag exactly as written, attributes included, to reopen it in the next chunk. */
  source: string;
}

/** Where the HTML may be cut, and which tags are open at each such place. */
interface HtmlMap {
  /** cuttable[i]: a cut between html[i-1] and html[i] lands outside tags, entities and surrogate pairs. */
  cuttable: boolean[];
  /** stacks[i]: the tags open at boundary i, outermost first. */
  stacks: (readonly OpenTag[])[];
}

const TAG = /<(\/?)([a-zA-Z][\w-]*)[^>]*>/y;
const ENTITY = /&(?:#\d{1,7}|#x[\da-fA-F]{1,6}|[a-zA-Z][a-zA-Z\d]{1,31});/y;

/** Length of the indivisible piece starting at i: a tag, an entity, a surrogate pair or one unit. */
function atomLength(html: string, i: number): number {
  const pattern = html[i] === "<" ? TAG : html[i] === "&" ? ENTITY : undefined;
  if (pattern) {
    pattern.lastIndex = i;
    const match = pattern.exec(html);
    if (match) return match[0].length;
  }
  const code = html.charCodeAt(i);
  const next = html.charCodeAt(i + 1);
  return code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff ? 2 : 1;
}

function applyTag(stack: readonly OpenTag[], source: string): readonly OpenTag[] {
  TAG.lastIndex = 0;
  const match = TAG.exec(source);
  const name = match?.[2]?.toLowerCase() ?? "";
  if (match?.[1] === "/") {
    const index = stack.map((tag) => tag.name).lastIndexOf(name);
    return index < 0 ? stack : stack.slice(0, index);
  }
  return source.endsWith("/>") ? stack : [...stack, { name, source }];
}

function mapHtml(html: string): HtmlMap {
  const cuttable = new Array<boolean>(html.length + 1).fill(true);
  const stacks = new Array<readonly OpenTag[]>(html.length + 1);
  let stack: readonly OpenTag[] = [];
  let i = 0;
  while (i < html.length) {
    const length = atomLength(html, i);
    for (let k = i; k < i + length; k++) stacks[k] = stack;
    for (let k = i + 1; k < i + length; k++) cuttable[k] = false;
    if (html[i] === "<" && length > 1) stack = applyTag(stack, html.slice(i, i + length));
    i += length;
  }
  stacks[html.length] = stack;
  return { cuttable, stacks };
}

function openingTags(stack: readonly OpenTag[] | undefined): string {
  return (stack ?? []).map((tag) => tag.source).join("");
}

function closingTags(stack: readonly OpenTag[] | undefined): string {
  return (stack ?? [])
    .map((tag) => `</${tag.name}>`)
    .reverse()
    .join("");
}

/** Cut preferences, best first; the separator itself is dropped at the cut. */
const SEPARATORS = ["\n\n", "\n", " "];

/**
 * Splits Telegram HTML into chunks of at most `limit` UTF-16 code units (JS `.length`). We count
 * the HTML source, tags and entities included: it is never shorter than the text Telegram counts
 * after parsing, so every chunk is safe, at the price of slightly smaller chunks. Cuts prefer
 * paragraph breaks, then line breaks, then spaces (each only if the chunk stays at least half
 * full), then anywhere outside tags, entities and surrogate pairs. Tags open at a cut are closed at
 * the end of the chunk and reopened, attributes included, at the start of the next, so every chunk
 * parses alone. Chunks without visible text are dropped.
 */
export function splitTelegramHtml(html: string, limit = TELEGRAM_MESSAGE_LIMIT): string[] {
  const map = mapHtml(html);
  const chunks: string[] = [];
  let start = 0;
  while (start < html.length) {
    const prefix = openingTags(map.stacks[start]);
    const fits = (end: number): boolean =>
      prefix.length + (end - start) + closingTags(map.stacks[end]).length <= limit;
    const room = limit - prefix.length;
    const cut = fits(html.length)
      ? { end: html.length, next: html.length }
      : chooseCut(html, map, start, room, fits);
    chunks.push(prefix + html.slice(start, cut.end) + closingTags(map.stacks[cut.end]));
    start = cut.next;
  }
  return chunks.filter(hasVisibleText);
}

function chooseCut(
  html: string,
  map: HtmlMap,
  start: number,
  room: number,
  fits: (end: number) => boolean,
): { end: number; next: number } {
  let longest = Math.min(html.length, start + room);
  while (longest > start && !(map.cuttable[longest] && fits(longest))) longest--;
  if (longest <= start) {
    throw new Error(`splitTelegramHtml: the limit leaves no room for text inside the tags open at ${start}`);
  }
  const shortest = start + Math.floor((longest - start) / 2);
  for (const separator of SEPARATORS) {
    for (let end = longest; end > shortest; end--) {
      if (html.startsWith(separator, end) && map.cuttable[end] && fits(end)) {
        return { end, next: end + separator.length };
      }
    }
  }
  return { end: longest, next: longest };
}

function hasVisibleText(html: string): boolean {
  return html.replace(/<[^>]*>/g, "").trim() !== "";
}
