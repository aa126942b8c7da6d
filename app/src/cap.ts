/** How much of one tool result (or one incoming message) the model is shown at most. */
export const RESULT_LIMIT_BYTES = 50 * 1024;

/**
 * Cuts text to `limitBytes` (on a character boundary) and says so, with a hint on how to get the
 * rest, so one huge output cannot flood the context window.
 */
export function capText(text: string, limitBytes: number, hint: string): string {
  const bytes = Buffer.byteLength(text);
  if (bytes <= limitBytes) return text;
  const cut = Buffer.from(text)
    .subarray(0, limitBytes)
    .toString("utf8")
    .replace(/\uFFFD$/, "");
  const shownLines = cut.split("\n").length;
  return `${cut}\n[TRUNCATED: the result was ${bytes} bytes; only the first ${limitBytes} bytes (${shownLines} lines) are shown. ${hint}]`;
}
