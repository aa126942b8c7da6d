import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { silentLogger } from "@stavrobot/common";
import { openDatabase, type Database } from "../../src/db/database.js";
import { migrate } from "../../src/db/migrations.js";

/**
 * Each test file gets its own database. With TEST_DATABASE_URL (a PostgreSQL server the tests may
 * create databases on), a fresh database is created there and dropped afterwards; without it,
 * the app falls back to the embedded PGlite in the test's own data directory.
 */
export interface TestDatabase {
  /** Environment for the app: DATABASE_URL, or nothing for the embedded database. */
  env: Record<string, string>;
  kind: "postgres" | "pglite";
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) return { env: {}, kind: "pglite", drop: async () => {} };
  const name = `stavrobot_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    env: { DATABASE_URL: url.toString() },
    kind: "postgres",
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

export interface MigratedTestDatabase {
  db: Database;
  /** The test's own directory (the embedded database lives in `pglite/` inside it). */
  dir: string;
  /** Closes the database, drops it (a server) and removes its data directory. */
  close(): Promise<void>;
}

/**
 * A test file's own database, open and migrated: on the server when TEST_DATABASE_URL names one,
 * otherwise the embedded PGlite in a data directory named after `name`.
 */
export async function openMigratedTestDatabase(name: string): Promise<MigratedTestDatabase> {
  const database = await createTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), `${name}-test-`));
  const db = await openDatabase({ env: database.env, dataDir: join(dir, "pglite"), logger: silentLogger });
  await migrate(db);
  return {
    db,
    dir,
    async close() {
      await db.close();
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A database of one kind, opened bare (no migrations), and how to be rid of it. */
export type DatabaseOpener = () => Promise<{ db: Database; done: () => Promise<void> }>;

/**
 * Both kinds of database a test can run on side by side: always the embedded PGlite, in a
 * directory of its own; and, with TEST_DATABASE_URL, a fresh database on that server.
 */
export function bothDatabases(prefix: string): [string, DatabaseOpener][] {
  const kinds: [string, DatabaseOpener][] = [
    [
      "pglite",
      async () => {
        const dir = mkdtempSync(join(tmpdir(), `stavrobot-${prefix}-`));
        const { openPglite } = await import("../../src/db/pglite.js");
        const db = await openPglite(join(dir, "pglite"));
        return {
          db,
          done: async () => {
            await db.close();
            rmSync(dir, { recursive: true, force: true });
          },
        };
      },
    ],
  ];
  if (process.env.TEST_DATABASE_URL) {
    kinds.push([
      "postgres",
      async () => {
        const database = await createTestDatabase();
        const { openPostgres } = await import("../../src/db/database.js");
        const db = openPostgres(database.env.DATABASE_URL as string);
        return {
          db,
          done: async () => {
            await db.close();
            await database.drop();
          },
        };
      },
    ]);
  }
  return kinds;
}
