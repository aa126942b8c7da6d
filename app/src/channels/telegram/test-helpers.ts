/** Assertions shared by the Telegram formatting tests (imported by tests only). */

const TELEGRAM_TAGS = new Set(["b", "i", "s", "u", "code", "pre", "a", "blockquote", "tg-spoiler"]);

/** Throws unless every tag is one Telegram supports, properly nested and closed, and `&` only starts an entity. */
export function assertWellFormed(html: string): void {
  const stack: string[] = [];
  for (const match of html.matchAll(/<(\/?)([a-z-]+)((?:\s[^>]*)?)>|<|&(?!(?:lt|gt|amp|quot|#\d+);)/g)) {
    const [whole, slash, name = ""] = match;
    if (whole === "<" || whole === "&") throw new Error(`unescaped ${whole} at ${match.index} in ${html}`);
    if (!TELEGRAM_TAGS.has(name)) throw new Error(`unsupported tag <${name}> in ${html}`);
    if (!slash) stack.push(name);
    else if (stack.pop() !== name) throw new Error(`mis-nested </${name}> at ${match.index} in ${html}`);
  }
  if (stack.length > 0) throw new Error(`unclosed <${stack.join(">, <")}> in ${html}`);
}

/** The text a Telegram client would show. */
export function textContent(html: string): string {
  return html
    .replace(/<[^>]*>/g, "")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, "&");
}
