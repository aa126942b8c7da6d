import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/helpers/db.js";
import { openPostgres, type Database } from "./database.js";
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
      await expect(attempt).rejects.toThrow();
      const { rows } = await db.query<{ one: number }>("SELECT 1 AS one");
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
    }
  });
});

describe("the embedded database", () => {
  it("is sized for one person: small shared buffers instead of a server's 128 MB", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-pglite-"));
    const db = await openPglite(join(dir, "pglite"));
    try {
      const { rows } = await db.query<{ shared_buffers: string }>("SHOW shared_buffers");
      expect(rows).toEqual([{ shared_buffers: "16MB" }]);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
