import pg from "pg";
import { openPglite } from "./pglite.js";
import { usesServer } from "./pglite-load.js";
import { DatabaseUnavailableError, isDatabaseUnavailable, untilAborted } from "./unavailable.js";
import type { Logger } from "@stavrobot/common";
import { setTimeout as sleep } from "node:timers/promises";

export { DatabaseUnavailableError, isDatabaseUnavailable, usesServer };
export type {
  Database,
  EmbeddedFiles,
  QueryOptions,
  QueryResult,
  Queryable,
  StatementPart,
  StatementResult,
  TextParsers,
  Transaction,
} from "./types.js";
import type { Database, QueryOptions, Queryable, StatementPart, TextParsers, Transaction } from "./types.js";

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

export interface DatabaseOptions {
  /** `DATABASE_URL`; when absent, `PG*` variables; when neither, embedded PGlite in `dataDir`. */
  env: NodeJS.ProcessEnv;
  dataDir: string;
  logger: Logger;
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
  return openPglite(options.dataDir, {
    templateDir: options.env.PGLITE_TEMPLATE_DIR || undefined,
    logger: options.logger,
  });
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

/** A client of a pool for one or more statements, watched for the loss of its session. */
interface Session {
  client: pg.PoolClient;
  /** The error a statement failed with, as an outage when it ended the session. */
  classify(error: unknown): unknown;
  /** Whether the session was lost (the client is no use any more). */
  readonly lost: boolean;
  /** Back to the pool, or closed when `discard` or when the session was lost. */
  release(discard?: boolean): void;
}

/**
 * A session of `pool`. Failing to get one is an outage whatever the reason (the server refuses,
 * is not accepting connections, does not answer, or the pool waited in vain). While it is checked
 * out the pool no longer listens for its errors: a connection dropping between two statements would
 * otherwise emit an unhandled 'error' and end the process.
 */
async function checkOut(pool: pg.Pool): Promise<Session> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw new DatabaseUnavailableError(error);
  }
  // pg reports a dead socket to the client ('error', then 'end') before it fails the statements
  // that were running on it.
  let lost = false;
  const onLost = () => {
    lost = true;
  };
  client.on("error", onLost);
  client.on("end", onLost);
  return {
    client,
    get lost() {
      return lost;
    },
    classify: (error) => (lost || endsSession(error) ? new DatabaseUnavailableError(error) : error),
    release(discard = false) {
      client.off("error", onLost);
      client.off("end", onLost);
      client.release(discard || lost);
    },
  };
}

/** A server error that ends the session (FATAL: terminated, shutting down, …). */
function endsSession(error: unknown): boolean {
  return error instanceof pg.DatabaseError && (error.severity === "FATAL" || error.severity === "PANIC");
}

export function openPostgres(connectionString?: string): Database {
  const statement = preparedNames();
  // A server that does not answer must fail a query within seconds, not hang the queue forever.
  // One person's turns come minutes apart, and pg closes a connection idle for 10 s by default:
  // nearly every turn connected again and planned its statements again. The few connections stay
  // open instead (idleTimeoutMillis 0); one the server drops is replaced when next needed.
  const pool = new pg.Pool({
    connectionString,
    max: 5,
    types,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 0,
  });
  const relaxedPool = new pg.Pool({
    connectionString,
    max: 2,
    types,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 0,
    options: "-c synchronous_commit=off",
  });
  // An idle client dropped by the server must not crash the process.
  pool.on("error", () => {});
  relaxedPool.on("error", () => {});
  let closed = false;
  /** One statement on a session of `from` (what `pool.query` does, watching the session). */
  const run = async <R>(from: pg.Pool, sql: string, params?: unknown[], options?: QueryOptions) => {
    const session = await checkOut(from);
    try {
      const result = await session.client.query(statement(sql, params, options));
      return { rows: result.rows as R[], rowCount: result.rowCount ?? 0 };
    } catch (error) {
      throw session.classify(error);
    } finally {
      session.release();
    }
  };
  const db: Database = {
    kind: "postgres",
    relaxed: {
      query: (sql, params, options) => run(relaxedPool, sql, params, options),
    },
    query: (sql, params, options) => run(pool, sql, params, options),
    waitUntilAvailable: (signal) => pollUntilAvailable(db, signal, () => closed),
    async transaction(fn) {
      const session = await checkOut(pool);
      const { client } = session;
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
        if (!session.lost) {
          await client.query("ROLLBACK").catch(() => {
            broken = true;
          });
        }
        throw session.classify(error);
      } finally {
        session.release(broken);
      }
    },
    async executeScript(sql) {
      const session = await checkOut(pool);
      let broken = false;
      try {
        const raw = (await session.client.query(sql)) as unknown as pg.QueryResult | pg.QueryResult[];
        return (Array.isArray(raw) ? raw : [raw]).map((result) => ({
          command: result.command ?? undefined,
          columns: (result.fields ?? []).map((field) => field.name),
          rows: (result.rows ?? []) as Record<string, unknown>[],
          rowCount: result.rowCount ?? 0,
        }));
      } catch (error) {
        broken = true;
        throw session.classify(error);
      } finally {
        // A script may leave a transaction open or change session settings: never reuse it.
        session.release(broken || /\b(begin|set|start)\b/i.test(sql));
      }
    },
    close: async () => {
      closed = true;
      await Promise.all([pool.end(), relaxedPool.end()]);
    },
  };
  return db;
}

/**
 * Polls with a trivial query, with growing pauses, until it succeeds. Once the database is closed
 * (the app is stopping) it never resolves, and keeps nothing running: what waits is resumed from
 * the inbox at the next start.
 */
async function pollUntilAvailable(
  db: Queryable,
  signal: AbortSignal | undefined,
  closed: () => boolean,
): Promise<void> {
  for (let delay = 250; !signal?.aborted; delay = Math.min(delay * 2, 5_000)) {
    if (closed()) return untilAborted(signal);
    try {
      await db.query("SELECT 1");
      return;
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
    }
    await sleep(delay, undefined, { signal }).catch(() => undefined);
  }
}
