import { beforeAll, describe, expect, it } from "vitest";
import { useTestApp } from "./helpers/app.js";
import { raw } from "./helpers/http.js";

/**
 * The database explorer's API on the real database (PostgreSQL or PGlite, with the app's
 * migrations): tables, columns, paged and sorted rows; names checked against the catalog.
 */
const t = useTestApp();
const get = (path: string) => raw(t.app.port, "GET", path);
const ODD = 'odd "table" name';
const rowsOf = (table: string, query = "") =>
  get(`/api/explorer/tables/${encodeURIComponent(table)}/rows${query}`);

beforeAll(async () => {
  await t.app.db.query(
    `CREATE TABLE "${ODD.replaceAll('"', '""')}" (id INTEGER, "Label" TEXT, data BYTEA, doc JSONB)`,
  );
  for (let i = 1; i <= 7; i++) {
    await t.app.db.query(`INSERT INTO "${ODD.replaceAll('"', '""')}" VALUES ($1, $2, $3, $4)`, [
      i,
      `label ${String.fromCharCode(96 + ((i * 3) % 7) + 1)}`,
      Buffer.from([0xde, 0xad, i]),
      JSON.stringify({ n: i, nested: { text: "x".repeat(i) } }),
    ]);
  }
  await t.app.db.query("CREATE VIEW explorer_view AS SELECT 1 AS one");
});

describe("GET /api/explorer/tables", () => {
  it("lists the public base tables with exact row counts, views left out", async () => {
    const answer = await get("/api/explorer/tables");
    expect(answer.status).toBe(200);
    const names = answer.json.map((table: { name: string }) => table.name);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["inbox", "messages", "usage", "allowlist", ODD]));
    expect(names).not.toContain("explorer_view");
    expect(answer.json.find((table: { name: string }) => table.name === ODD)).toEqual({
      name: ODD,
      rowCount: 7,
    });
    expect((await raw(t.app.port, "GET", "/api/explorer/tables", { auth: null })).status).toBe(401);
  });
});

describe("GET /api/explorer/tables/<t>", () => {
  it("describes a table's columns in order", async () => {
    const answer = await get(`/api/explorer/tables/${encodeURIComponent(ODD)}`);
    expect(answer.status).toBe(200);
    expect(answer.json).toEqual({
      name: ODD,
      columns: [
        { name: "id", type: "integer", nullable: true },
        { name: "Label", type: "text", nullable: true },
        { name: "data", type: "bytea", nullable: true },
        { name: "doc", type: "jsonb", nullable: true },
      ],
    });
    const inbox = await get("/api/explorer/tables/inbox");
    expect(inbox.json.columns[0]).toEqual({ name: "id", type: "integer", nullable: false });
  });

  it.each([
    "no_such_table",
    "explorer_view",
    "pg_class",
    "information_schema.tables",
    'inbox"; DROP TABLE inbox; --',
    "inbox;",
    "INBOX",
    " inbox",
  ])("answers 404 for %j", async (name) => {
    for (const path of [
      `/api/explorer/tables/${encodeURIComponent(name)}`,
      `/api/explorer/tables/${encodeURIComponent(name)}/rows`,
    ]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(404);
      expect(answer.json).toEqual({ error: "Table not found", kind: "not-found" });
    }
    expect((await get("/api/explorer/tables/inbox")).status).toBe(200);
  });
});

describe("GET /api/explorer/tables/<t>/rows", () => {
  it("pages rows in the first column's order by default, cells as JSON can carry them", async () => {
    const first = await rowsOf(ODD, "?limit=3");
    expect(first.status).toBe(200);
    expect(first.json.columns).toEqual(["id", "Label", "data", "doc"]);
    expect(first.json).toMatchObject({ total: 7, limit: 3, offset: 0 });
    expect(first.json.rows.map((row: unknown[]) => row[0])).toEqual([1, 2, 3]);
    expect(first.json.rows[0]).toEqual([1, "label d", "\\xdead01", { n: 1, nested: { text: "x" } }]);
    const last = await rowsOf(ODD, "?limit=3&offset=6");
    expect(last.json.rows.map((row: unknown[]) => row[0])).toEqual([7]);
    const past = await rowsOf(ODD, "?offset=100");
    expect(past.json).toMatchObject({ rows: [], total: 7, limit: 50, offset: 100 });
  });

  it("sorts by a column, either way, and by the first column when the name is not one", async () => {
    const labels = async (query: string) =>
      (await rowsOf(ODD, query)).json.rows.map((row: unknown[]) => row[1]);
    const ascending = await labels("?orderBy=Label&orderDirection=asc");
    expect(ascending).toEqual([...ascending].sort());
    expect(await labels("?orderBy=Label&orderDirection=DESC")).toEqual([...ascending].reverse());
    const ids = async (query: string) => (await rowsOf(ODD, query)).json.rows.map((row: unknown[]) => row[0]);
    const hostile = new URLSearchParams({ orderBy: 'id";DROP TABLE inbox;--', orderDirection: "desc" });
    expect(await ids(`?${hostile}`)).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(await ids("?orderBy=label")).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect((await get("/api/explorer/tables/inbox")).status).toBe(200);
  });

  it.each([
    ["?limit=0", "'limit' must be an integer from 1 to 100"],
    ["?limit=101", "'limit' must be an integer from 1 to 100"],
    ["?limit=ten", "'limit' must be an integer from 1 to 100"],
    ["?limit=1.5", "'limit' must be an integer from 1 to 100"],
    ["?offset=-1", "'offset' must be an integer from 0 to 2147483647"],
    ["?offset=99999999999", "'offset' must be an integer from 0 to 2147483647"],
    ["?orderDirection=sideways", `'orderDirection' must be "asc" or "desc"`],
  ])("refuses %s with 400", async (query, message) => {
    const answer = await rowsOf(ODD, query);
    expect(answer.status).toBe(400);
    expect(answer.json).toEqual({ error: message });
  });

  it("shows long binary values cut, with their size", async () => {
    await t.app.db.query(`INSERT INTO "${ODD.replaceAll('"', '""')}" (id, data) VALUES (100, $1)`, [
      Buffer.alloc(5000, 0xab),
    ]);
    const answer = await rowsOf(ODD, "?orderBy=id&orderDirection=desc&limit=1");
    const cell: string = answer.json.rows[0][2];
    expect(cell.startsWith("\\xabab")).toBe(true);
    expect(cell.endsWith("… (5000 bytes)")).toBe(true);
    expect(answer.json.rows[0][1]).toBeNull();
  });
});
