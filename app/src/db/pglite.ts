import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { PGlite, parse as pgliteParse, protocol as pgliteProtocol } from "@electric-sql/pglite";
import { StartRefused, type Logger } from "@stavrobot/common";
import { ensureEmbeddedDatabase, defaultTemplateDir } from "./pglite-create.js";
import { loadPglite } from "./pglite-load.js";
import type { Database, QueryOptions, QueryResult, TextParsers } from "./types.js";
import { DatabaseUnavailableError, untilAborted } from "./unavailable.js";

/**
 * PostgreSQL's default 128 MB of shared buffers are sized for a server with many users; PGlite
 * keeps them in the process's WebAssembly memory, and all of them are resident from the start
 * whether a page is ever read into them or not (the idle app grows by exactly their size). The
 * files stay in the OS page cache, so a page not in them is a read from memory all the same: with
 * 4 MB, a tool turn on a million stored messages and `db_search` over them took the time they
 * took with 16 MB (DECISIONLOG.md).
 */
export const PGLITE_SETTINGS = ["-c", "shared_buffers=4MB"];
// PGlite starts PostgreSQL with `-F` (no fsync), and turning it on would change nothing: its file
// system layer has no fsync and its fdatasync does nothing. Committed writes are in the kernel's
// page cache when a statement returns (they survive the process's death), not on the disk
// (DECISIONLOG.md: "The embedded database does not survive a power cut").

/** Exit code of a start refused because the embedded database is damaged (EX_DATAERR, sysexits.h). */
export const EXIT_DAMAGED_DATABASE = 65;

/**
 * The embedded database could not be opened: its files are damaged or incomplete. Nothing is
 * changed in the directory; the message says what PostgreSQL reported and what to do, and a start
 * ends on it in that one line (a refusal, not a stack trace).
 */
export class EmbeddedDatabaseError extends StartRefused {
  constructor(dataDir: string, cause: unknown, stderr: string[]) {
    const reported = stderr.map((line) => line.trim()).filter(Boolean);
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      `the embedded database in ${dataDir} could not be opened (${reason}` +
        `${reported.length > 0 ? `; PostgreSQL said: ${reported.join(" / ")}` : ""}). ` +
        `Its files may be damaged or incomplete; they were left as they are. Restore a backup ` +
        `(npm run restore), or move the directory aside to start with a new database.`,
      EXIT_DAMAGED_DATABASE,
    );
    this.name = "EmbeddedDatabaseError";
    this.cause = cause;
  }
}

/**
 * A parameter as text, the way `pg` sends it (so a statement behaves the same on both databases):
 * null for null, ISO time for a date, an array literal for an array, JSON for an object.
 */
export function textParam(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return arrayLiteral(value);
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function arrayLiteral(values: unknown[]): string {
  const items = values.map((value) => {
    if (value === null || value === undefined) return "NULL";
    if (Array.isArray(value)) return arrayLiteral(value);
    const text = textParam(value) as string;
    return `"${text.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
  });
  return `{${items.join(",")}}`;
}

/**
 * Statements run with `{ prepare: true }`: each is parsed and planned once under a name, then
 * bound and run in a single trip into PGlite (Bind, Describe, Execute, Sync in one message).
 * PGlite's own `query()` makes six trips and parses and plans every time: about 0.3 ms against
 * 0.15 ms for a turn's inserts, and 0.1 ms against 0.03 ms for a trivial SELECT.
 */
class PreparedStatements {
  private readonly names = new Map<string, string>();
  private count = 0;

  constructor(
    private readonly lite: PGlite,
    private readonly protocol: typeof pgliteProtocol,
    private readonly parse: typeof pgliteParse,
  ) {}

  /** Runs `sql`; `inTransaction` when the caller already holds PGlite's transaction lock. */
  run<R>(
    sql: string,
    params: unknown[],
    inTransaction: boolean,
    parsers?: TextParsers,
  ): Promise<QueryResult<R>> {
    const go = () => this.lite._runExclusiveQuery(() => this.execute<R>(sql, params, parsers));
    return inTransaction ? go() : this.lite._runExclusiveTransaction(go);
  }

  private async execute<R>(sql: string, params: unknown[], parsers?: TextParsers): Promise<QueryResult<R>> {
    const { serialize } = this.protocol;
    let name = this.names.get(sql);
    const parts: Uint8Array[] = [];
    const fresh = name === undefined;
    if (name === undefined) {
      name = `stavrobot_${++this.count}`;
      parts.push(serialize.parse({ name, text: sql }));
    }
    parts.push(
      serialize.bind({ statement: name, values: params.map(textParam) }),
      serialize.describe({ type: "P" }),
      serialize.execute({}),
      serialize.sync(),
    );
    // Throws the statement's error once PGlite has read the whole message (Sync included). A
    // statement that failed the first time it ran is parsed again, under a new name, next time.
    const { messages } = await this.lite.execProtocol(Buffer.concat(parts), { syncToFs: false });
    if (fresh) this.names.set(sql, name);
    const [result] = this.parse.parseResults(
      messages,
      parsers ? { ...this.lite.parsers, ...parsers } : this.lite.parsers,
    );
    const rows = (result?.rows ?? []) as R[];
    return { rows, rowCount: result?.affectedRows ?? rows.length };
  }
}

/** PGlite's options for a statement with parsers of its own (PGlite puts them before its own). */
function parserOptions(options: QueryOptions | undefined): { parsers: TextParsers } | undefined {
  return options?.parsers ? { parsers: options.parsers } : undefined;
}

export interface PgliteOptions {
  /** Where prepared databases are kept (PGLITE_TEMPLATE_DIR; default: node_modules' cache). */
  templateDir?: string;
  logger?: Logger;
}

/**
 * The embedded database in `dataDir`. A new one is not made here: PostgreSQL's initdb would run
 * in this process's WebAssembly memory, which never shrinks (~450 MB kept for good). It is copied
 * from a prepared, migrated database, or made in a short-lived process (pglite-create.ts).
 */
export async function openPglite(dataDir: string, options: PgliteOptions = {}): Promise<Database> {
  // Loaded while the database is made (a failure is the open's, below, not an unhandled one).
  loadPglite().catch(() => undefined);
  await ensureEmbeddedDatabase(dataDir, {
    templateDir: options.templateDir ?? defaultTemplateDir(),
    logger: options.logger,
  });
  return openPgliteHere(dataDir);
}

/** The most of PGlite's own output an error quotes: PostgreSQL's FATAL line and what led to it. */
const STDERR_LINES = 8;

/**
 * The embedded database in `dataDir`, opened in this process; PGlite runs initdb here when the
 * directory holds none (only the short-lived creating process should let it).
 */
export async function openPgliteHere(dataDir: string): Promise<Database> {
  const { library, vector, wasmModule } = await loadPglite();
  const { PGlite, protocol, parse } = library;
  mkdirSync(dataDir, { recursive: true });
  // PostgreSQL writes it as it starts; a start that fails must not leave it (it says "in use").
  const pidFile = join(dataDir, "postmaster.pid");
  const hadPidFile = existsSync(pidFile);
  const stderr: string[] = [];
  const lite = await PGlite.create(dataDir, {
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS],
    pgliteWasmModule: wasmModule,
    extensions: { vector },
    onStderr: (line: string) => {
      stderr.push(line);
      if (stderr.length > STDERR_LINES) stderr.shift();
      return false;
    },
  }).catch((error: unknown) => {
    if (!hadPidFile) rmSync(pidFile, { force: true });
    throw new EmbeddedDatabaseError(dataDir, error, stderr);
  });
  const prepared = new PreparedStatements(lite, protocol, parse);
  /**
   * In-process, it cannot be out of reach; once closed (the app stopping) it cannot be used, which
   * is an outage like a server's: what was not saved is refused as such, what was is resumed at
   * the next start.
   */
  const rethrow = (error: unknown): never => {
    throw lite.closed ? new DatabaseUnavailableError(error) : error;
  };
  const query = async <R>(sql: string, params: unknown[] = [], options?: QueryOptions) => {
    if (options?.prepare) return prepared.run<R>(sql, params, false, options.parsers).catch(rethrow);
    const result = await lite.query<R>(sql, params, parserOptions(options)).catch(rethrow);
    return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
  };
  return {
    kind: "pglite",
    relaxed: { query },
    waitUntilAvailable: async (signal) => {
      if (lite.closed) await untilAborted(signal);
    },
    query,
    transaction: (fn) =>
      lite
        .transaction(async (tx) =>
          fn({
            async query<R>(sql: string, params: unknown[] = [], options?: QueryOptions) {
              if (options?.prepare) return prepared.run<R>(sql, params, true, options.parsers);
              const result = await tx.query<R>(sql, params, parserOptions(options));
              return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
            },
            async exec(sql: string) {
              await tx.exec(sql);
            },
          }),
        )
        .catch(rethrow),
    async executeScript(sql) {
      const results = await lite.exec(sql).catch(rethrow);
      return results.map((result) => ({
        command: undefined,
        columns: result.fields.map((field) => field.name),
        rows: result.rows as Record<string, unknown>[],
        rowCount: result.fields.length > 0 ? result.rows.length : (result.affectedRows ?? 0),
      }));
    },
    close: () => lite.close(),
    embedded: {
      dataDir,
      // As PGlite's own close(): the transaction lock, then the statement lock.
      exclusively: (fn) => lite._runExclusiveTransaction(() => lite._runExclusiveQuery(async () => fn())),
    },
  };
}
