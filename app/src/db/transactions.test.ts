import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../test/helpers/db.js";
import { openPostgres, type Database } from "./database.js";
import { openPglite } from "./pglite.js";
import { wroteSince } from "./transactions.js";

/**
 * Whether SQL wrote anything, as the database says it. On a server, transaction ids count across
 * every database of it (other test files write meanwhile), so "nothing written" is asserted on the
 * embedded database only, which nothing else shares; "written" must hold on both.
 */
const kinds: [string, () => Promise<{ db: Database; done: () => Promise<void> }>][] = [
  [
    "pglite",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "stavrobot-xid-"));
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
      const database: TestDatabase = await createTestDatabase();
      const db = openPostgres(database.env.DATABASE_URL);
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

describe.each(kinds)("wroteSince on %s", (kind, open) => {
  let db: Database;
  let done: () => Promise<void>;
  beforeAll(async () => {
    ({ db, done } = await open());
    await db.query("CREATE TABLE notes (id serial PRIMARY KEY, text text)");
    await db.query(
      "CREATE FUNCTION add_note() RETURNS void LANGUAGE sql AS $$ INSERT INTO notes (text) VALUES ('by a function') $$",
    );
  });
  afterAll(async () => {
    await done?.();
  });

  /** A write of our own, as the conversation's save is: its transaction id from the row's xmin. */
  async function ownWrite(): Promise<number> {
    const row = await db.query<{ xmin: string }>("INSERT INTO notes (text) VALUES ('own') RETURNING xmin");
    return Number(row.rows[0]?.xmin);
  }

  it("says so after writes of any kind: a statement, a function called by a SELECT, DDL", async () => {
    for (const script of [
      "INSERT INTO notes (text) VALUES ('plain')",
      "SELECT add_note()",
      "CREATE TABLE other (id int)",
      "UPDATE notes SET text = 'x' WHERE id = 1; SELECT 1",
    ]) {
      const since = await ownWrite();
      await db.executeScript(script);
      expect(await wroteSince(db, since), script).toBe(true);
    }
  });

  // A write rolled back ends a transaction that had an id too: it counts as written (the caller
  // then checks what it holds), never the other way round.
  it.skipIf(kind !== "pglite")("says nothing was written after reads", async () => {
    for (const script of [
      "SELECT * FROM notes",
      "SELECT 1; SELECT count(*) FROM notes",
      "SHOW server_version",
    ]) {
      const since = await ownWrite();
      await db.executeScript(script);
      expect(await wroteSince(db, since), script).toBe(false);
    }
  });
});
