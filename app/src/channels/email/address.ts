/**
 * Email addresses as the allowlist and `[owner] email` hold them: lower-case, and patterns with
 * `*`. A bare `*` lets anyone through; anywhere else a `*` stands for any run of characters that
 * never crosses the `@` (`*@example.com` is everyone at example.com, never `x@evil.com@example.com`
 * and never a subdomain).
 */

const ADDRESS = /^[^\s@]+@[^\s@]+$/;

/** The address in the one form addresses compare in (trimmed, lower-case), or undefined when it is none. */
export function normalizeAddress(text: string): string | undefined {
  const address = text.trim().toLowerCase();
  return ADDRESS.test(address) && address.length <= 320 ? address : undefined;
}

/** Whether `pattern` has a `*` in it (a glob entry, which an unauthenticated sender never matches). */
export function isGlob(pattern: string): boolean {
  return pattern.includes("*");
}

/** Whether `address` is one `pattern` allows. */
export function addressMatches(pattern: string, address: string): boolean {
  const wanted = pattern.trim().toLowerCase();
  const actual = normalizeAddress(address);
  if (actual === undefined) return false;
  if (wanted === "*") return true;
  if (!isGlob(wanted)) return wanted === actual;
  // One `@` on each side, so a star on either side stays on its side.
  if (wanted.split("@").length !== 2) return false;
  const source = wanted
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join("[^@]*");
  return new RegExp(`^${source}$`).test(actual);
}

/** The domain of an address (after its last `@`), lower-case. */
export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf("@") + 1).toLowerCase();
}
