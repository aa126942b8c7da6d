import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/helpers/db.js";
import { DatabaseUnavailableError, openPostgres, type Database } from "./database.js";
import { openPglite } from "./pglite.js";

const serverUrl = process.env.TEST_DATABASE_URL;

describe.runIf(serverUrl)("a PostgreSQL connection dropped while a transaction holds it", () => {
  let database: TestDatabase;
  let db: Database;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = openPostgres(database.env.DATABASE_URL);
  });

  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  it("fails the transaction, not the process, and the next query gets a fresh connection", async () => {
    const admin = new pg.Client({ connectionString: database.env.DATABASE_URL });
    await admin.connect();
    try {
      const attempt = db.transaction(async (tx) => {
        const { rows } = await tx.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
        // Between two queries of the transaction, the server ends this connection.
        await admin.query("SELECT pg_terminate_backend($1)", [rows[0]!.pid]);
        await new Promise((resolve) => setTimeout(resolve, 200));
        await tx.query("SELECT 1");
      });
      // The session is gone: an outage, whatever the driver's message says.
      await expect(attempt).rejects.toBeInstanceOf(DatabaseUnavailableError);
      const { rows } = await db.query<{ one: number }>("SELECT 1 AS one");
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
    }
  });
});

describe.runIf(serverUrl)("what counts as the database being unavailable", () => {
  let database: TestDatabase;
  let db: Database;
  let admin: pg.Client;
  let name: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    db = openPostgres(database.env.DATABASE_URL);
    name = new URL(database.env.DATABASE_URL as string).pathname.slice(1);
    admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    await admin?.end();
    await db?.close();
    await database?.drop();
  });

  it("is any failure to open a session, whatever the server answers", async () => {
    await db.query("SELECT 1");
    await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [name]);
    try {
      const attempts = [
        () => db.query("SELECT 1"),
        () => db.relaxed.query("SELECT 1"),
        () => db.transaction((tx) => tx.query("SELECT 1")),
        () => db.executeScript("SELECT 1"),
      ];
      for (const attempt of attempts) {
        const error = await attempt().then(
          () => undefined,
          (failure: unknown) => failure,
        );
        expect(error).toBeInstanceOf(DatabaseUnavailableError);
        // SQLSTATE 55000, "database … is not currently accepting connections" (or, for a session
        // the pool still held, its end): on no list of codes.
        expect((error as Error).message).toMatch(/not currently accepting connections|terminat/);
      }
      await expect(db.query("SELECT 1")).rejects.toMatchObject({ cause: { code: "55000" } });
    } finally {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    }
    await expect(db.query("SELECT 1 AS one")).resolves.toMatchObject({ rows: [{ one: 1 }] });
  });

  it("is a session lost while a statement runs", async () => {
    // Caught at once: it may fail while the loop below is still waiting for its answer.
    const running = db.query("SELECT pg_sleep(30)").catch((error: unknown) => error);
    await vi.waitFor(
      async () => {
        const { rowCount } = await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'SELECT pg_sleep%'",
          [name],
        );
        expect(rowCount).toBe(1);
      },
      { timeout: 5_000 },
    );
    expect(await running).toBeInstanceOf(DatabaseUnavailableError);
  });

  it("is not an error of the statement itself, nor of the code in a transaction", async () => {
    // A pool of its own: the sessions the tests above ended may still be in the shared one.
    const db = openPostgres(database.env.DATABASE_URL);
    onTestFinished(() => db.close());
    const syntax = await db.query("SELEC 1").catch((error: unknown) => error);
    expect(syntax).toBeInstanceOf(pg.DatabaseError);
    expect(syntax).toMatchObject({ code: "42601" });
    const own = new Error("the caller's own failure");
    await expect(db.transaction(() => Promise.reject(own))).rejects.toBe(own);
    const inScript = await db.executeScript("SELECT 1/0").catch((error: unknown) => error);
    expect(inScript).toMatchObject({ code: "22012" });
    expect(inScript).not.toBeInstanceOf(DatabaseUnavailableError);
  });

  it("waits for the database after it is closed only until aborted", async () => {
    const closed = openPostgres(database.env.DATABASE_URL);
    await closed.close();
    await expect(closed.query("SELECT 1")).rejects.toBeInstanceOf(DatabaseUnavailableError);
    const abort = new AbortController();
    const waiting = closed.waitUntilAvailable(abort.signal);
    const settled = vi.fn();
    void waiting.then(settled);
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).not.toHaveBeenCalled();
    abort.abort();
    await waiting;
  });
});

describe("the embedded database", () => {
  it("is unavailable once closed, and a statement's own error is not an outage", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-pglite-"));
    const db = await openPglite(join(dir, "pglite"));
    try {
      const syntax = await db.query("SELEC 1").catch((error: unknown) => error);
      expect(syntax).not.toBeInstanceOf(DatabaseUnavailableError);
      await db.close();
      for (const attempt of [
        db.query("SELECT 1"),
        db.query("SELECT 1", [], { prepare: true }),
        db.transaction((tx) => tx.query("SELECT 1")),
        db.executeScript("SELECT 1"),
      ]) {
        await expect(attempt).rejects.toBeInstanceOf(DatabaseUnavailableError);
      }
      const abort = new AbortController();
      const waiting = db.waitUntilAvailable(abort.signal);
      const settled = vi.fn();
      void waiting.then(settled);
      await new Promise((resolve) => setImmediate(resolve));
      expect(settled).not.toHaveBeenCalled();
      abort.abort();
      await waiting;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("is sized for one person: small shared buffers instead of a server's 128 MB", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-pglite-"));
    const db = await openPglite(join(dir, "pglite"));
    try {
      const { rows } = await db.query<{ shared_buffers: string }>("SHOW shared_buffers");
      expect(rows).toEqual([{ shared_buffers: "4MB" }]);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
