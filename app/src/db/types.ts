/**
 * The database's shapes, apart from the code that opens one (`database.ts` opens a server or the
 * embedded PGlite, `pglite.ts` implements the latter: both import these, neither the other's types).
 */

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
  /**
   * Resolves once a trivial query succeeds again (polling with growing pauses), or when aborted.
   * Once the database is closed (the app stopping) only an abort ends the wait.
   */
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
