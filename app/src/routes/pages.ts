import { HttpError, checkBasicPassword, type Handler } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import { latestPage, normalizePagePath, type PageVersion } from "../db/pages.js";
import { PageQueryFailed, runPageQuery } from "../pages/query.js";

export interface PagesDeps {
  db: Database;
  password: string;
}

/**
 * Pages are LLM-authored and may run their own scripts, so they get a policy of their own: scripts
 * and styles inline or from jsDelivr (as the reference allows), data only from this origin.
 */
export const PAGE_CSP =
  "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; " +
  "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'self'; base-uri 'none'; form-action 'self'";

const unauthorized = (): HttpError =>
  new HttpError(401, "Unauthorized", undefined, {
    "WWW-Authenticate": 'Basic realm="stavrobot", charset="UTF-8"',
  });

/** The page, if it exists (not a tombstone) and the caller may see it. */
async function visiblePage(
  deps: PagesDeps,
  rawPath: string,
  authorization: string | undefined,
): Promise<PageVersion> {
  const path = normalizePagePath(rawPath);
  const page = path ? await latestPage(deps.db, path) : undefined;
  if (!page || page.data.length === 0) throw new HttpError(404, "Not found");
  if (!page.isPublic && !checkBasicPassword(authorization, deps.password)) throw unauthorized();
  return page;
}

/** `GET /pages/<path>`: public pages for anyone, private ones with the owner's password. */
export function createPageHandler(deps: PagesDeps): Handler {
  return async ({ req, params }) => {
    const page = await visiblePage(deps, params["*"] ?? "", req.headers.authorization);
    return {
      body: page.data,
      headers: {
        "Content-Type": page.mimetype,
        "Content-Security-Policy": PAGE_CSP,
        "Cache-Control": page.isPublic ? "public, max-age=60" : "private, no-store",
      },
    };
  };
}

/**
 * `GET /api/pages/<path>/queries/<name>?param=value`: runs one of the page's named queries with
 * the page's visibility. The page path is everything up to the LAST `/queries/`.
 */
export function createPageQueryHandler(deps: PagesDeps): Handler {
  return async ({ req, url, params }) => {
    const rest = params["*"] ?? "";
    const cut = rest.lastIndexOf("/queries/");
    if (cut === -1) throw new HttpError(404, "Not found");
    const page = await visiblePage(deps, rest.slice(0, cut), req.headers.authorization);
    const sql = page.queries?.[rest.slice(cut + "/queries/".length)];
    if (sql === undefined) throw new HttpError(404, "Query not found");
    try {
      return { json: await runPageQuery(deps.db, sql, url.searchParams) };
    } catch (error) {
      // A public page's caller learns that its query failed, not why (the schema stays private).
      if (page.isPublic && error instanceof PageQueryFailed) {
        throw new HttpError(400, "Query failed");
      }
      throw error;
    }
  };
}
