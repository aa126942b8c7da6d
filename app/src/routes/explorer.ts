import { badRequest, type Router } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import { describeTable, listTables, readRows, type RowsRequest } from "../web/explorer.js";

const MAX_LIMIT = 100;
const DEFAULT_LIMIT = 50;
const MAX_OFFSET = 2 ** 31 - 1;

/**
 * The database explorer's API (read-only, the reference's shapes):
 * `GET /api/explorer/tables` → `[{name, rowCount}]`,
 * `GET /api/explorer/tables/<t>` → `{name, columns: [{name, type, nullable}]}`,
 * `GET /api/explorer/tables/<t>/rows?limit&offset&orderBy&orderDirection` →
 * `{columns, rows: [[…]], total, limit, offset}`. An unknown table is 404 "Table not found".
 */
export function addExplorerRoutes(router: Router, db: Database): Router {
  return router
    .get("/api/explorer/tables", async () => ({ json: await listTables(db) }))
    .get("/api/explorer/tables/:name", async ({ params }) => ({
      json: await describeTable(db, params.name ?? ""),
    }))
    .get("/api/explorer/tables/:name/rows", async ({ params, url }) => ({
      json: await readRows(db, params.name ?? "", rowsRequest(url.searchParams)),
    }));
}

/** The query string checked: a wrong limit, offset or direction is refused, naming what is allowed. */
export function rowsRequest(query: URLSearchParams): RowsRequest {
  const limit = integer(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT);
  const offset = integer(query, "offset", 0, 0, MAX_OFFSET);
  const direction = (query.get("orderDirection") || "asc").toLowerCase();
  if (direction !== "asc" && direction !== "desc")
    throw badRequest(`'orderDirection' must be "asc" or "desc"`);
  return { limit, offset, orderBy: query.get("orderBy") || undefined, orderDirection: direction };
}

function integer(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const raw = query.get(name);
  if (raw === null || raw === "") return fallback;
  const value = /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(value >= min && value <= max)) throw badRequest(`'${name}' must be an integer from ${min} to ${max}`);
  return value;
}
