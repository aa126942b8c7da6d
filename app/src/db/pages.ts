import type { Queryable } from "./database.js";

/** One version of a page. An empty body is a tombstone (the page was deleted). */
export interface PageVersion {
  path: string;
  version: number;
  mimetype: string;
  data: Buffer;
  isPublic: boolean;
  queries: Record<string, string> | null;
  createdAt: Date;
}

interface PageRow {
  path: string;
  version: number;
  mimetype: string;
  data: Buffer | Uint8Array;
  is_public: boolean;
  queries: Record<string, string> | null;
  created_at: Date | string;
}

const columns = "path, version, mimetype, data, is_public, queries, created_at";

function toVersion(row: PageRow): PageVersion {
  return {
    path: row.path,
    version: row.version,
    mimetype: row.mimetype,
    data: Buffer.from(row.data),
    isPublic: row.is_public,
    queries: row.queries,
    createdAt: new Date(row.created_at),
  };
}

/** Page paths are plain: letters, digits, `-_.`, and `/` between segments. */
export function normalizePagePath(path: string): string | undefined {
  const trimmed = path
    .trim()
    .replace(/^\/+|\/+$/g, "")
    .replace(/^pages\//, "");
  if (!trimmed || trimmed.length > 200) return undefined;
  const segments = trimmed.split("/");
  if (!segments.every((segment) => /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(segment) && segment !== ".."))
    return undefined;
  return segments.join("/");
}

export async function latestPage(db: Queryable, path: string): Promise<PageVersion | undefined> {
  const result = await db.query<PageRow>(
    `SELECT ${columns} FROM pages WHERE path = $1 ORDER BY version DESC LIMIT 1`,
    [path],
  );
  return result.rows[0] ? toVersion(result.rows[0]) : undefined;
}

export async function pageVersion(
  db: Queryable,
  path: string,
  version: number,
): Promise<PageVersion | undefined> {
  const result = await db.query<PageRow>(`SELECT ${columns} FROM pages WHERE path = $1 AND version = $2`, [
    path,
    version,
  ]);
  return result.rows[0] ? toVersion(result.rows[0]) : undefined;
}

export async function listVersions(
  db: Queryable,
  path: string,
): Promise<{ version: number; created_at: string; is_tombstone: boolean }[]> {
  const result = await db.query<{ version: number; created_at: Date | string; is_tombstone: boolean }>(
    "SELECT version, created_at, octet_length(data) = 0 AS is_tombstone FROM pages WHERE path = $1 ORDER BY version",
    [path],
  );
  return result.rows.map((row) => ({ ...row, created_at: new Date(row.created_at).toISOString() }));
}

/** Appends a version (pages are never changed in place, so every version can be restored). */
export async function addVersion(
  db: Queryable,
  page: Omit<PageVersion, "version" | "createdAt">,
): Promise<number> {
  const result = await db.query<{ version: number }>(
    `INSERT INTO pages (path, version, mimetype, data, is_public, queries)
     VALUES ($1, COALESCE((SELECT max(version) FROM pages WHERE path = $1), 0) + 1, $2, $3, $4, $5)
     RETURNING version`,
    [
      page.path,
      page.mimetype,
      page.data,
      page.isPublic,
      page.queries === null ? null : JSON.stringify(page.queries),
    ],
  );
  return (result.rows[0] as { version: number }).version;
}

export async function listPages(
  db: Queryable,
): Promise<{ path: string; version: number; is_public: boolean }[]> {
  const result = await db.query<{ path: string; version: number; is_public: boolean }>(
    `SELECT DISTINCT ON (path) path, version, is_public FROM pages
     WHERE octet_length(data) > 0 OR version > 0 ORDER BY path, version DESC`,
  );
  return result.rows;
}
