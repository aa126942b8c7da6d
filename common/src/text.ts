/**
 * Text that PostgreSQL cannot store: U+0000 (refused in TEXT and in JSONB's `\u0000`) and UTF-16
 * surrogates that are not part of a pair (refused as invalid escapes in JSONB, and not valid UTF-8
 * on the wire). A plugin that prints binary output produces both.
 */

// eslint-disable-next-line no-control-regex
const NUL = /\u0000/g;

/** True when the text can be stored and sent as it is. */
export function isStorableText(text: string): boolean {
  return text.isWellFormed() && !text.includes("\u0000");
}

/** Replaces U+0000 and lone surrogates with U+FFFD, leaving every other character as it is. */
export function sanitizeText(text: string): string {
  if (isStorableText(text)) return text;
  return text.toWellFormed().replace(NUL, "\uFFFD");
}

/**
 * `sanitizeText` applied to every string (values and keys) of a JSON-like value. Returns the same
 * object when nothing needed replacing, so the common case allocates nothing.
 */
export function sanitizeDeep<T>(value: T): T {
  return clean(value) as T;
}

function clean(value: unknown): unknown {
  if (typeof value === "string") return sanitizeText(value);
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((item) => {
      const next = clean(item);
      if (next !== item) changed = true;
      return next;
    });
    return changed ? out : value;
  }
  if (value !== null && typeof value === "object" && isPlainObject(value)) {
    let changed = false;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      const cleanKey = sanitizeText(key);
      const next = clean(item);
      if (next !== item || cleanKey !== key) changed = true;
      out[cleanKey] = next;
    }
    return changed ? out : value;
  }
  return value;
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Wraps text in a Markdown code fence longer than any backtick run inside it. */
export function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((match) => match[0].length));
  const marks = "`".repeat(longest + 1);
  return `${marks}\n${text}\n${marks}`;
}
