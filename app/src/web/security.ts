import type { IncomingMessage } from "node:http";
import { HttpError } from "@stavrobot/common";

/**
 * The admin UI's policy: its own scripts, styles and API only, nothing inline (every script and
 * style is a file under /assets), no plugins, no framing. Pages the model writes (`/pages/*`) have
 * a policy of their own.
 */
export const UI_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/** Headers of every UI page and asset (the listener adds nosniff, no-referrer and no-store). */
export const UI_HEADERS: Readonly<Record<string, string>> = { "Content-Security-Policy": UI_CSP };

/** Methods that change nothing; every other one is checked. */
const SAFE_METHODS = new Set(["GET", "HEAD"]);

/**
 * Refuses (403) a state-changing request a browser sent from another site. Browsers name the page
 * a request comes from in `Origin` on every POST, PUT and DELETE, and a page cannot forge it; the
 * owner's cached Basic credentials would otherwise go with a request any site makes. The origin
 * must name the host the request was sent to (the `Host` header) or one of `trusted` (the public
 * address, for a reverse proxy that rewrites `Host`). Requests without `Origin` (the CLI, curl,
 * sibling services, Telegram) are not browsers acting for a page and pass.
 */
export function checkOrigin(req: IncomingMessage, trusted: readonly string[]): void {
  if (SAFE_METHODS.has(req.method ?? "GET")) return;
  const origin = req.headers.origin;
  if (origin === undefined) return;
  if (!originAllowed(origin, req.headers.host, trusted))
    throw new HttpError(403, "Cross-site request refused: the Origin header does not name this host");
}

export function originAllowed(origin: string, host: string | undefined, trusted: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    // "null" (a sandboxed frame, a file) and anything malformed name no host.
    return false;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return false;
  if (host !== undefined && url.host === host.trim().toLowerCase()) return true;
  return trusted.some((address) => sameOrigin(address, url));
}

function sameOrigin(address: string, url: URL): boolean {
  try {
    return new URL(address).origin === url.origin;
  } catch {
    return false;
  }
}
