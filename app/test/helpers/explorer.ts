import { expect } from "vitest";
import { raw } from "./http.js";

/**
 * Every row of a table, read as the owner reads it: the database explorer's read-only API
 * (`GET /api/explorer/tables/<table>/rows`, with the password), a page at a time, sorted by the
 * first column. For a test of the product, which holds its database: nothing else opens it.
 */
export async function tableRows(app: { port: number }, table: string): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for (let offset = 0; ; offset += 100) {
    const page = await raw(
      app.port,
      "GET",
      `/api/explorer/tables/${encodeURIComponent(table)}/rows?limit=100&offset=${offset}`,
    );
    expect(page.status, page.text).toBe(200);
    const {
      columns,
      rows: cells,
      total,
    } = page.json as {
      columns: string[];
      rows: unknown[][];
      total: number;
    };
    for (const row of cells) rows.push(Object.fromEntries(columns.map((name, index) => [name, row[index]])));
    if (cells.length === 0 || rows.length >= total) return rows;
  }
}
