import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { HttpError, type Handler, type Reply } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import { latestPage, normalizePagePath, type PageVersion } from "../db/pages.js";
import {
  FRAME_PARAM,
  INERT_PAGE_POLICY,
  PAGE_KEY_PARAM,
  framedPageHtml,
  framedPagePolicy,
  holderHtml,
  holderPolicy,
  pageKey,
  pageKeyValid,
  scriptable,
} from "../pages/frame.js";
import { PageQueryFailed, runPageQuery } from "../pages/query.js";

export interface PagesDeps {
  db: Database;
  /** Signs the pages' keys. */
  password: string;
  /** Whether the request carries the owner's password (counted like every other check of it). */
  isOwner: (req: IncomingMessage) => boolean;
  /** The public address (`publicHostname`): another name the browser may know this site by. */
  publicHostname: string;
  /** `[pages]`: hosts every page may load scripts from, and hosts a page may send requests to. */
  scriptHosts: readonly string[];
  connectHosts: Readonly<Record<string, readonly string[]>>;
}

const unauthorized = (): HttpError =>
  new HttpError(401, "Unauthorized", undefined, {
    "WWW-Authenticate": 'Basic realm="stavrobot", charset="UTF-8"',
  });

/** The page, if it exists (not a tombstone) and the caller may see it. */
async function visiblePage(
  deps: PagesDeps,
  rawPath: string,
  req: IncomingMessage,
  key?: string | null,
): Promise<PageVersion> {
  const path = normalizePagePath(rawPath);
  const page = path ? await latestPage(deps.db, path) : undefined;
  if (!page || page.data.length === 0) throw new HttpError(404, "Not found");
  if (page.isPublic) return page;
  if (key) {
    if (!pageKeyValid(keySecret(deps.password), page.path, key))
      throw new HttpError(403, "This page's key is not valid for it or has expired: reload the page.");
    return page;
  }
  if (!deps.isOwner(req)) throw unauthorized();
  return page;
}

/**
 * Page keys are signed with a secret derived from the owner's password: they survive a restart,
 * and a new password ends every key given out with the old one.
 */
function keySecret(password: string): string {
  return createHash("sha256").update(`stavrobot page keys\0${password}`).digest("base64");
}

/**
 * `GET /pages/<path>`: public pages for anyone, private ones with the owner's password (see
 * `pages/frame.ts` for how a web page runs without the owner's powers). A browser opening an HTML
 * page gets the frame's holder; the frame (or any other caller) gets the page itself, sandboxed.
 */
export function createPageHandler(deps: PagesDeps): Handler {
  return async ({ req, url, params }): Promise<Reply> => {
    const page = await visiblePage(deps, params["*"] ?? "", req);
    const cache = page.isPublic ? "public, max-age=60" : "private, no-store";
    if (!scriptable(page.mimetype)) {
      return {
        body: page.data,
        headers: {
          "Content-Type": page.mimetype,
          "Content-Security-Policy": INERT_PAGE_POLICY,
          "Cache-Control": cache,
        },
      };
    }
    const origins = originsOf(req, deps.publicHostname);
    const policy = framedPagePolicy(page.path, {
      origins,
      scriptHosts: deps.scriptHosts,
      connectHosts: deps.connectHosts[page.path] ?? [],
    });
    const as = shownAs(req, url);
    if (as === "data") {
      // Not a browser showing it (curl, a script): the bytes as stored, under the frame's policy.
      return {
        body: page.data,
        headers: { "Content-Type": page.mimetype, "Content-Security-Policy": policy, "Cache-Control": cache },
      };
    }
    if (as === "document") {
      const frame = new URL(url.href);
      frame.searchParams.set(FRAME_PARAM, "1");
      return {
        body: holderHtml(page.path, `${frame.pathname}${frame.search}`),
        headers: {
          "Content-Type": "text/html; charset=utf-8",
          "Content-Security-Policy": holderPolicy(origins),
          "Cache-Control": "no-store",
        },
      };
    }
    const html = framedPageHtml(
      page.data.toString("utf8"),
      page.path,
      pageKey(keySecret(deps.password), page.path),
    );
    return {
      body: html,
      headers: {
        "Content-Type": page.mimetype,
        "Content-Security-Policy": policy,
        // The key in the page is the owner's: never kept by a cache, even for a public page.
        "Cache-Control": "private, no-store",
        "X-DNS-Prefetch-Control": "off",
      },
    };
  };
}

/**
 * How the caller shows the page: a browser opening it as a document of its own, our frame, or not
 * at all (a script's request, curl). Browsers say which in `Sec-Fetch-Dest`; for one that does not
 * send it, the frame's marker on the address, then whether it asks for HTML, decide.
 */
function shownAs(req: IncomingMessage, url: URL): "document" | "frame" | "data" {
  const dest = req.headers["sec-fetch-dest"];
  // A browser's word wins over the marker: a link to the frame's address opened as a page of its
  // own would run the page, with its key, where it may navigate anywhere.
  if (dest === "iframe" || dest === "frame") return "frame";
  if (dest === "document") return "document";
  if (dest !== undefined) return "data";
  if (url.searchParams.has(FRAME_PARAM)) return "frame";
  return /\btext\/html\b/.test(req.headers.accept ?? "") ? "document" : "data";
}

/** The origins the browser may know this site by: the address it asked, the public one. */
function originsOf(req: IncomingMessage, publicHostname: string): string[] {
  const origins = new Set<string>();
  const host = req.headers.host?.trim().toLowerCase();
  if (host && /^[a-z0-9.:[\]-]+$/.test(host)) origins.add(`http://${host}`);
  try {
    origins.add(new URL(publicHostname).origin);
  } catch {
    // Checked at start; nothing else to add.
  }
  return [...origins];
}

/**
 * `GET /api/pages/<path>/queries/<name>?param=value`: runs one of the page's named queries with
 * the page's visibility. The page path is everything up to the LAST `/queries/`. The page's own
 * script (in its sandboxed frame, an opaque origin) sends the page's key instead of the password,
 * and may read the answer (`Access-Control-Allow-Origin`); so may anyone, for a public page.
 */
export function createPageQueryHandler(deps: PagesDeps): Handler {
  return async ({ req, url, params }) => {
    const rest = params["*"] ?? "";
    const cut = rest.lastIndexOf("/queries/");
    if (cut === -1) throw new HttpError(404, "Not found");
    const key = url.searchParams.get(PAGE_KEY_PARAM);
    const page = await visiblePage(deps, rest.slice(0, cut), req, key);
    const sql = page.queries?.[rest.slice(cut + "/queries/".length)];
    if (sql === undefined) throw new HttpError(404, "Query not found");
    const readable = page.isPublic || key ? { "Access-Control-Allow-Origin": "*" } : undefined;
    try {
      return { json: await runPageQuery(deps.db, sql, url.searchParams), headers: readable };
    } catch (error) {
      // A public page's caller learns that its query failed, not why (the schema stays private).
      if (page.isPublic && error instanceof PageQueryFailed) {
        throw new HttpError(400, "Query failed", undefined, readable);
      }
      throw error;
    }
  };
}
