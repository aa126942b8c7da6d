/** What the benchmark's sections share: which databases it measures, and an environment on one. */
import { createTestEnv, type TestEnv } from "../test/helpers/app.js";

const SERVER_URL = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;

export type DbKind = "postgres" | "pglite";

/** PostgreSQL when a server is named, and always the embedded PGlite. */
export const DATABASES: DbKind[] = SERVER_URL ? ["postgres", "pglite"] : ["pglite"];

/** A test environment (config + data dir + database) on the chosen database. */
export async function environment(kind: DbKind, config: string): Promise<TestEnv> {
  if (kind === "postgres") process.env.TEST_DATABASE_URL = SERVER_URL;
  else delete process.env.TEST_DATABASE_URL;
  try {
    return await createTestEnv(config);
  } finally {
    delete process.env.TEST_DATABASE_URL;
  }
}
