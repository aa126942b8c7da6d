import { DomainError } from "@stavrobot/common";
import type { Database, Queryable } from "../db/database.js";

/**
 * The read-only database explorer: the public schema's base tables, their columns and their rows.
 * A table or column name from a request is only ever used after it was found in the catalog, and
 * then quoted; values (limit, offset) are bound. Every read runs in a READ ONLY transaction with a
 * statement timeout, so nothing here can change data or hold the database for long.
 */

export interface TableSummary {
  name: string;
  rowCount: number;
}

export interface ColumnInfo {
  name: string;
  type: string;
  nullable: boolean;
}

export interface RowsRequest {
  limit: number;
  offset: number;
  /** A column name; anything that is not one sorts by the first column. */
  orderBy: string | undefined;
  orderDirection: "asc" | "desc";
}

export interface RowsPage {
  columns: string[];
  rows: unknown[][];
  total: number;
  limit: number;
  offset: number;
}

const STATEMENT_TIMEOUT_MS = 5_000;
/** Binary cells are shown as hex, cut here (a stored page can be megabytes). */
const BYTES_SHOWN = 2_048;

export const tableNotFound = (): DomainError => new DomainError("not-found", "Table not found");

export async function listTables(db: Database): Promise<TableSummary[]> {
  return readOnly(db, async (tx) => {
    const tables = await tableNames(tx);
    const summaries: TableSummary[] = [];
    // Exact counts: the statistics' estimates lag behind, and a single owner's tables are small.
    for (const name of tables) {
      const { rows } = await tx.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${table(name)}`);
      summaries.push({ name, rowCount: Number(rows[0]?.n ?? 0) });
    }
    return summaries;
  });
}

export async function describeTable(
  db: Database,
  name: string,
): Promise<{ name: string; columns: ColumnInfo[] }> {
  return readOnly(db, async (tx) => ({ name, columns: await columnsOf(tx, name) }));
}

export async function readRows(db: Database, name: string, request: RowsRequest): Promise<RowsPage> {
  return readOnly(db, async (tx) => {
    const columns = (await columnsOf(tx, name)).map((column) => column.name);
    const sortColumn =
      request.orderBy !== undefined && columns.includes(request.orderBy) ? request.orderBy : columns[0];
    const direction = request.orderDirection === "desc" ? "DESC" : "ASC";
    // A table without columns exists in PostgreSQL; it has nothing to sort by.
    const order = sortColumn === undefined ? "" : `ORDER BY ${quoted(sortColumn)} ${direction}`;
    const counted = await tx.query<{ n: number | string }>(`SELECT count(*) AS n FROM ${table(name)}`);
    const { rows } = await tx.query<Record<string, unknown>>(
      `SELECT * FROM ${table(name)} ${order} LIMIT $1 OFFSET $2`,
      [request.limit, request.offset],
    );
    return {
      columns,
      rows: rows.map((row) => columns.map((column) => cell(row[column]))),
      total: Number(counted.rows[0]?.n ?? 0),
      limit: request.limit,
      offset: request.offset,
    };
  });
}

async function readOnly<T>(db: Database, work: (tx: Queryable) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await tx.query("SET TRANSACTION READ ONLY");
    await tx.query(`SET LOCAL statement_timeout = ${STATEMENT_TIMEOUT_MS}`);
    return work(tx);
  });
}

async function tableNames(tx: Queryable): Promise<string[]> {
  const { rows } = await tx.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
  );
  return rows.map((row) => row.table_name);
}

/** The table's columns in order; "Table not found" unless it is a base table of the public schema. */
async function columnsOf(tx: Queryable, name: string): Promise<ColumnInfo[]> {
  const { rows: found } = await tx.query(
    `SELECT 1 FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name = $1`,
    [name],
  );
  if (found.length === 0) throw tableNotFound();
  const { rows } = await tx.query<{ column_name: string; data_type: string; is_nullable: string }>(
    `SELECT column_name, data_type, is_nullable FROM information_schema.columns
     WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
    [name],
  );
  return rows.map((row) => ({
    name: row.column_name,
    type: row.data_type,
    nullable: row.is_nullable === "YES",
  }));
}

/** An identifier the catalog named, quoted for PostgreSQL (a `"` inside is doubled). */
function quoted(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

/** A table of the public schema, by a name the catalog gave. */
function table(name: string): string {
  return `"public".${quoted(name)}`;
}

/** A cell as JSON can carry it: bytes as `\x` hex (cut), big integers as text. */
function cell(value: unknown): unknown {
  if (value instanceof Uint8Array) {
    const hex = Buffer.from(value.subarray(0, BYTES_SHOWN)).toString("hex");
    return value.length > BYTES_SHOWN ? `\\x${hex}… (${value.length} bytes)` : `\\x${hex}`;
  }
  if (typeof value === "bigint") return value.toString();
  return value;
}
