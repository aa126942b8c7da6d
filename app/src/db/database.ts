import pg from "pg";
import { openPglite } from "./pglite.js";
import type { Logger } from "@stavrobot/common";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * The database server cannot be reached right now (refused, dropped, shutting down). Callers keep
 * what they hold and try again when it is back, instead of failing the message they work on.
 */
export class DatabaseUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`The database is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
    this.name = "DatabaseUnavailableError";
  }
}

/** PostgreSQL connection-class and shutdown SQLSTATEs, and socket errors: the server is away, not the query wrong. */
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "08000",
  "08001",
  "08003",
  "08004",
  "08006",
  "57P01",
  "57P02",
  "57P03",
  "53300",
]);

export function isDatabaseUnavailable(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && UNAVAILABLE_CODES.has(code)) return true;
  return /Connection terminated|connection error|timeout exceeded when trying to connect|ECONNREFUSED|Client was closed/i.test(
    error.message,
  );
}

/** Rethrows a server-away error as DatabaseUnavailableError; everything else unchanged. */
function classify(error: unknown): never {
  if (isDatabaseUnavailable(error) && !(error instanceof DatabaseUnavailableError)) {
    throw new DatabaseUnavailableError(error);
  }
  throw error;
}

export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

export interface QueryOptions {
  /**
   * Parse and plan the statement once and keep it under a name (per connection): for the
   * statements every turn runs. Its text must not embed values that change (use parameters).
   */
  prepare?: boolean;
  /**
   * This statement's values of these types (by OID) are read with these functions from
   * PostgreSQL's text form (e.g. `numeric` as its exact digits), instead of the driver's default.
   * Both drivers then give the same values: they differ for `int8`, `numeric` and their arrays.
   */
  parsers?: TextParsers;
}

/** Type OID to the function reading a value of that type from PostgreSQL's text form. */
export type TextParsers = Readonly<Record<number, (text: string) => unknown>>;

export interface Queryable {
  query<R = Record<string, unknown>>(
    sql: string,
    params?: unknown[],
    options?: QueryOptions,
  ): Promise<QueryResult<R>>;
}

export interface Transaction extends Queryable {
  /** Runs several statements at once (no parameters). */
  exec(sql: string): Promise<void>;
}

/**
 * A data-modifying statement that can ride in another statement (and so in its commit) as a
 * `WITH` part; `sql` receives the number of its first parameter.
 */
export interface StatementPart {
  sql: (firstParam: number) => string;
  params: unknown[];
}

/**
 * The parts as `WITH` items numbered from `firstParam`, for a statement whose own parameters come
 * first: "WITH p1 AS (...), p2 AS (...) " (empty without parts), and their parameters.
 */
export function withParts(parts: StatementPart[], firstParam: number): { sql: string; params: unknown[] } {
  if (parts.length === 0) return { sql: "", params: [] };
  const items: string[] = [];
  const params: unknown[] = [];
  for (const [i, part] of parts.entries()) {
    items.push(`p${i + 1} AS (${part.sql(firstParam + params.length)})`);
    params.push(...part.params);
  }
  return { sql: `WITH ${items.join(", ")} `, params };
}

/** One statement's outcome when running a free-form SQL script (the execute_sql tool). */
export interface StatementResult {
  command: string | undefined;
  columns: string[];
  rows: Record<string, unknown>[];
  rowCount: number;
}

/**
 * The app's view of PostgreSQL: a server through `pg`, or the embedded PGlite when no server is
 * configured. Both speak the same SQL; only connection handling differs.
 */
export interface Database extends Queryable {
  readonly kind: "postgres" | "pglite";
  /**
   * For writes that may be lost should the database server itself crash (a "seen" flag, usage
   * accounting): committed without waiting for the disk. Never for messages or inbox entries.
   */
  readonly relaxed: Queryable;
  /** Resolves once a trivial query succeeds again (polling with growing pauses), or when aborted. */
  waitUntilAvailable(signal?: AbortSignal): Promise<void>;
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>;
  /** Runs one or more statements separated by semicolons (simple query protocol). */
  executeScript(sql: string): Promise<StatementResult[]>;
  close(): Promise<void>;
  /** The embedded database only: where its files are, and a moment when nothing writes them. */
  readonly embedded?: EmbeddedFiles;
}

export interface EmbeddedFiles {
  dataDir: string;
  /**
   * Runs `fn` between transactions, while no statement runs: the files on disk are then a
   * consistent image (as after a kill, with every commit in them). Statements wait meanwhile.
   */
  exclusively<T>(fn: () => T | Promise<T>): Promise<T>;
}

export interface DatabaseOptions {
  /** `DATABASE_URL`; when absent, `PG*` variables; when neither, embedded PGlite in `dataDir`. */
  env: NodeJS.ProcessEnv;
  dataDir: string;
  logger: Logger;
}

export function usesServer(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.DATABASE_URL || env.PGHOST || env.PGDATABASE);
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  if (usesServer(options.env)) {
    const db = openPostgres(options.env.DATABASE_URL);
    await db.query("SELECT 1");
    return db;
  }
  options.logger.info("no DATABASE_URL or PG* variables: using embedded PostgreSQL", {
    dir: options.dataDir,
  });
  return openPglite(options.dataDir);
}

/** int8 (count(*), bigserial) as a number when it fits, as PGlite does, instead of a string. */
const INT8_OID = 20;
const types = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === INT8_OID && format !== "binary") {
      return (value: string) => {
        const number = Number(value);
        return Number.isSafeInteger(number) ? number : value;
      };
    }
    return pg.types.getTypeParser(oid, format as "text");
  }) as typeof pg.types.getTypeParser,
};

/** The app's type parsers, with a statement's own (QueryOptions.parsers) in front. */
function withParsers(parsers: TextParsers): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: string) =>
      (format !== "binary" ? parsers[oid] : undefined) ??
      types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
  };
}

/**
 * A query for `pg`: named when it is to be prepared (one name per statement text; `pg` prepares
 * it on each connection the first time that connection runs it).
 */
function preparedNames(): (
  sql: string,
  params: unknown[] | undefined,
  options?: QueryOptions,
) => pg.QueryConfig {
  const names = new Map<string, string>();
  return (sql, params, options) => {
    const parsers = options?.parsers;
    const custom = parsers ? { types: withParsers(parsers) } : {};
    if (!options?.prepare) return { text: sql, values: params, ...custom };
    let name = names.get(sql);
    if (!name) {
      name = `stavrobot_${names.size + 1}`;
      names.set(sql, name);
    }
    return { name, text: sql, values: params, ...custom };
  };
}

export function openPostgres(connectionString?: string): Database {
  const statement = preparedNames();
  // A server that does not answer must fail a query within seconds, not hang the queue forever.
  const pool = new pg.Pool({ connectionString, max: 5, types, connectionTimeoutMillis: 5_000 });
  const relaxedPool = new pg.Pool({
    connectionString,
    max: 2,
    types,
    connectionTimeoutMillis: 5_000,
    options: "-c synchronous_commit=off",
  });
  // An idle client dropped by the server must not crash the process.
  pool.on("error", () => {});
  relaxedPool.on("error", () => {});
  /**
   * A client of the pool for several queries. While it is checked out the pool no longer listens
   * for its errors, and a connection that drops between two queries would emit an unhandled
   * 'error' and end the process; the next query fails on its own, and `done` discards the client.
   */
  const connect = async () => {
    const client = await pool.connect().catch(classify);
    let dropped = false;
    const onError = () => {
      dropped = true;
    };
    client.on("error", onError);
    return {
      client,
      done(broken: boolean) {
        client.off("error", onError);
        client.release(broken || dropped);
      },
    };
  };
  const db: Database = {
    kind: "postgres",
    relaxed: {
      async query<R>(sql: string, params?: unknown[], options?: QueryOptions) {
        const result = await relaxedPool.query(statement(sql, params, options)).catch(classify);
        return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
      },
    },
    async query<R>(sql: string, params?: unknown[], options?: QueryOptions) {
      const result = await pool.query(statement(sql, params, options)).catch(classify);
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    },
    waitUntilAvailable: (signal) => pollUntilAvailable(db, signal),
    async transaction(fn) {
      const { client, done } = await connect();
      let broken = false;
      try {
        await client.query("BEGIN");
        const tx: Transaction = {
          async query<R>(sql: string, params?: unknown[], options?: QueryOptions) {
            const result = await client.query(statement(sql, params, options));
            return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
          },
          async exec(sql: string) {
            await client.query(sql);
          },
        };
        const value = await fn(tx);
        await client.query("COMMIT");
        return value;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {
          broken = true;
        });
        return classify(error);
      } finally {
        done(broken);
      }
    },
    async executeScript(sql) {
      const { client, done } = await connect();
      let broken = false;
      try {
        const raw = (await client.query(sql)) as unknown as pg.QueryResult | pg.QueryResult[];
        return (Array.isArray(raw) ? raw : [raw]).map((result) => ({
          command: result.command ?? undefined,
          columns: (result.fields ?? []).map((field) => field.name),
          rows: (result.rows ?? []) as Record<string, unknown>[],
          rowCount: result.rowCount ?? 0,
        }));
      } catch (error) {
        broken = true;
        return classify(error);
      } finally {
        // A script may leave a transaction open or change session settings: never reuse it.
        done(broken || /\b(begin|set|start)\b/i.test(sql));
      }
    },
    close: async () => {
      await Promise.all([pool.end(), relaxedPool.end()]);
    },
  };
  return db;
}

async function pollUntilAvailable(db: Queryable, signal?: AbortSignal): Promise<void> {
  for (let delay = 250; !signal?.aborted; delay = Math.min(delay * 2, 5_000)) {
    try {
      await db.query("SELECT 1");
      return;
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
    }
    await sleep(delay, undefined, { signal }).catch(() => undefined);
  }
}
