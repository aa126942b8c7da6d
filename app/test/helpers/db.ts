import { randomBytes } from "node:crypto";
import pg from "pg";

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
