import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@stavrobot/common";
import { createTestDatabase, type TestDatabase } from "../../test/helpers/db.js";
import { openDatabase, type Database } from "../db/database.js";
import { InboxStore } from "../db/inbox.js";
import { migrate } from "../db/migrations.js";
import { rehearseTurnWrites } from "./rehearsal.js";

let database: TestDatabase;
let dir: string;
let db: Database;

beforeAll(async () => {
  database = await createTestDatabase();
  dir = mkdtempSync(join(tmpdir(), "rehearsal-test-"));
  db = await openDatabase({ env: database.env, dataDir: join(dir, "pglite"), logger: silentLogger });
  await migrate(db);
}, 120_000);

afterAll(async () => {
  await db?.close();
  await database?.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe("rehearseTurnWrites", () => {
  it("runs a turn's writes and keeps none of them", async () => {
    const counts = async () => {
      const result = await db.query<{ inbox: number; messages: number; usage: number }>(
        `SELECT (SELECT count(*) FROM inbox) AS inbox, (SELECT count(*) FROM messages) AS messages,
                (SELECT count(*) FROM usage) AS usage`,
      );
      return result.rows[0];
    };
    await rehearseTurnWrites(db, "UTC");
    expect(await counts()).toEqual({ inbox: 0, messages: 0, usage: 0 });
    // The connection is left usable, outside any transaction: a real write commits.
    const { entry } = await new InboxStore(db).add(null, null, { message: "real", attachments: [] });
    expect(entry.id).toBeGreaterThan(0);
    expect(await counts()).toEqual({ inbox: 1, messages: 0, usage: 0 });
  });

  it("never throws, even when the database refuses", async () => {
    const broken = { ...db, transaction: async () => Promise.reject(new Error("down")) } as Database;
    await expect(rehearseTurnWrites(broken, "UTC")).resolves.toBeUndefined();
  });
});
