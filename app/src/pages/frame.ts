import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * How a page the model wrote is shown without the owner's powers (DECISIONLOG: "A page runs in a
 * sandboxed frame"). A browser opening `/pages/<path>` gets a small page of ours (the frame's
 * holder) whose only content is an `<iframe sandbox="allow-scripts">` of the same address; the
 * page's own HTML is served to that frame with `Content-Security-Policy: sandbox allow-scripts`,
 * so it runs in an opaque origin: the owner's cached password never goes with its requests, it
 * cannot read an answer of the admin API, and the API refuses its writes (their `Origin` is
 * `null`). The holder's `frame-src` lets the frame show only pages, so the page cannot navigate
 * itself (or anything else) to another site or to the admin pages; the sandbox forbids popups,
 * forms and navigating the holder. The page's script reads its own named queries with a key made
 * for that page alone (`page-key`), which a small script put before the page's HTML adds to
 * those requests.
 */

/** The query parameter a page's key rides in (a hyphen: never the name of a `$param:`). */
export const PAGE_KEY_PARAM = "page-key";
/** Set on the holder's frame address, for browsers that do not send `Sec-Fetch-Dest`. */
export const FRAME_PARAM = "page-frame";
/** Where the pages' local script libraries are served (Chart.js). */
export const PAGE_LIBRARY_PATH = "/pages-lib/";

/** How long a page's key lets its script read its queries (the owner reloads a page left open longer). */
const KEY_LIFETIME_MS = 12 * 60 * 60 * 1000;

/** A key that lets a script read the named queries of the page at `path`, and of no other page. */
export function pageKey(secret: string, path: string, now = Date.now()): string {
  const expires = Math.floor((now + KEY_LIFETIME_MS) / 1000).toString(36);
  return `${expires}.${sign(secret, path, expires)}`;
}

/** Whether `key` was made by `pageKey` for `path` and has not expired. */
export function pageKeyValid(secret: string, path: string, key: string, now = Date.now()): boolean {
  const [expires, signature, ...rest] = key.split(".");
  if (!expires || !signature || rest.length > 0 || !/^[0-9a-z]{1,12}$/.test(expires)) return false;
  if (parseInt(expires, 36) * 1000 < now) return false;
  const expected = Buffer.from(sign(secret, path, expires));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

function sign(secret: string, path: string, expires: string): string {
  return createHmac("sha256", secret).update(`page-key\0${path}\0${expires}`).digest("base64url");
}

/**
 * Whether a stored page is a web page whose scripts may run (in the frame). Any other type (an
 * SVG image included) is served inert: a browser shows it and runs nothing in it.
 */
export function scriptable(mimetype: string): boolean {
  const type = mimetype.split(";")[0]?.trim().toLowerCase() ?? "";
  return type === "text/html" || type === "application/xhtml+xml";
}

export interface PagePolicyOptions {
  /** The origins the browser may know this site by (the request's `Host`, `publicHostname`). */
  origins: readonly string[];
  /** Hosts the owner lets every page load scripts and styles from (`[pages] scriptHosts`). */
  scriptHosts: readonly string[];
  /** Hosts the owner lets this page send requests to (`[pages.connectHosts]`). */
  connectHosts: readonly string[];
}

/**
 * The policy of the page's own HTML (in the frame): an opaque origin (`sandbox allow-scripts`),
 * inline scripts and styles (pages are single files), scripts from the local libraries and the
 * owner's script hosts, requests only to this page's queries and the owner's hosts for it, no
 * frames, forms or plugins of its own.
 */
export function framedPagePolicy(path: string, options: PagePolicyOptions): string {
  const at = (suffix: string) => options.origins.map((origin) => `${origin}${suffix}`);
  const scripts = [...at(PAGE_LIBRARY_PATH), ...options.scriptHosts];
  return [
    "sandbox allow-scripts",
    "default-src 'none'",
    `script-src 'unsafe-inline' ${scripts.join(" ")}`,
    `style-src 'unsafe-inline' ${options.scriptHosts.join(" ")}`.trim(),
    `img-src data: blob: ${at("/pages/").join(" ")}`,
    `font-src data: ${options.scriptHosts.join(" ")}`.trim(),
    `connect-src ${[...at(`/api/pages/${path}/queries/`), ...options.connectHosts].join(" ")}`,
    "frame-src 'none'",
    "worker-src 'none'",
    "object-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
    "frame-ancestors 'self'",
  ].join("; ");
}

/** The policy of a page a browser must run no script in (any type but HTML). */
export const INERT_PAGE_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/**
 * The holder's policy: its stylesheet, and a frame that may show pages and nothing else (a page
 * navigating its frame to another site, or to the admin pages, is blocked by the browser).
 */
export function holderPolicy(origins: readonly string[]): string {
  return [
    "default-src 'none'",
    `style-src ${origins.map((origin) => `${origin}${PAGE_LIBRARY_PATH}`).join(" ")}`,
    `frame-src ${origins.map((origin) => `${origin}/pages/`).join(" ")}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
}

/** The holder: the frame, filling the window, titled with the page's path. */
export function holderHtml(path: string, frameSrc: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(path)}</title>
<link rel="stylesheet" href="${PAGE_LIBRARY_PATH}frame.css">
</head>
<body><iframe sandbox="allow-scripts" src="${escapeHtml(frameSrc)}" title="${escapeHtml(path)}"></iframe></body>
</html>
`;
}

/**
 * The script put before a page's HTML: requests to this page's queries (by `fetch` or
 * `XMLHttpRequest`, however the address is written) carry the page's key; nothing else changes.
 */
export function keyScript(path: string, key: string): string {
  const prefix = `/api/pages/${path}/queries/`;
  return `<script>(() => {
  const param = ${JSON.stringify(PAGE_KEY_PARAM)}, key = ${JSON.stringify(key)}, prefix = ${JSON.stringify(prefix)};
  const keyed = (address) => {
    try {
      const url = new URL(String(address), location.href);
      if (url.origin !== location.origin || !url.pathname.startsWith(prefix)) return address;
      url.searchParams.set(param, key);
      return url.href;
    } catch { return address; }
  };
  const fetchFirst = window.fetch;
  window.fetch = (input, init) => fetchFirst(input instanceof Request ? new Request(keyed(input.url), input) : keyed(input), init);
  const open = XMLHttpRequest.prototype.open;
  XMLHttpRequest.prototype.open = function (method, address, ...rest) { return open.call(this, method, keyed(address), ...rest); };
})();</script>
`;
}

/** `<script src>` of Chart.js on jsDelivr (how pages have always loaded it) → the local copy. */
const CHART_ON_CDN =
  /(<script\b[^>]*\bsrc\s*=\s*["'])https:\/\/cdn\.jsdelivr\.net\/npm\/chart\.js(?:@[^/"']*)?(?:\/[^"']*)?(["'])/gi;

/**
 * The page's HTML as the frame gets it: the key script first in its head (after a doctype, which
 * must stay first or the browser renders in quirks mode), Chart.js from this site.
 */
export function framedPageHtml(html: string, path: string, key: string): string {
  const page = html.replace(CHART_ON_CDN, `$1${PAGE_LIBRARY_PATH}chart.js$2`);
  const head = /<head\b[^>]*>/i.exec(page) ?? /^\uFEFF?\s*<!doctype[^>]*>/i.exec(page);
  const at = head ? head.index + head[0].length : 0;
  return page.slice(0, at) + keyScript(path, key) + page.slice(at);
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}
