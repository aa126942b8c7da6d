import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bothDatabases } from "../../test/helpers/db.js";
import type { Database } from "./database.js";
import { textParam } from "./pglite.js";

/** Prepared statements (`{ prepare: true }`) answer exactly as plain queries do, on both databases. */
const kinds = bothDatabases("prepared");

describe.each(kinds)("prepared statements on %s", (_kind, open) => {
  let db: Database;
  let done: () => Promise<void>;

  beforeAll(async () => {
    ({ db, done } = await open());
    await db.query(
      `CREATE TABLE things (id SERIAL PRIMARY KEY, name TEXT UNIQUE, big INT8, flag BOOLEAN, data JSONB,
         at TIMESTAMPTZ, tags TEXT[], nums INT[])`,
    );
  });
  afterAll(async () => done());

  const INSERT = `INSERT INTO things (name, big, flag, data, at, tags, nums) VALUES ($1, $2, $3, $4, $5, $6, $7)
    RETURNING id, name, big, flag, data, at, tags, nums`;
  const values = (name: string) => [
    name,
    2 ** 40,
    false,
    JSON.stringify({ text: 'a "quoted" \\ line\nand more', n: [1, 2] }),
    new Date("2026-11-25T10:00:00.000Z"),
    ["plain", 'with "quotes"', "back\\slash", null, "comma,here", ""],
    [1, 2, 3],
  ];

  it("returns the same rows as a plain query, for every kind of parameter", async () => {
    const plain = await db.query(INSERT, values("plain"));
    const prepared = await db.query(INSERT, values("prepared"), { prepare: true });
    const again = await db.query(INSERT, values("again"), { prepare: true });
    const strip = (row: Record<string, unknown> | undefined) => ({ ...row, id: 0, name: "" });
    expect(strip(prepared.rows[0])).toEqual(strip(plain.rows[0]));
    expect(strip(again.rows[0])).toEqual(strip(plain.rows[0]));
    expect(prepared.rows[0]).toMatchObject({ big: 2 ** 40, flag: false, nums: [1, 2, 3] });
    expect(prepared.rowCount).toBe(1);
    const read = await db.query<{ n: number }>(
      "SELECT count(*) AS n FROM things WHERE nums = $1::int[]",
      [[1, 2, 3]],
      {
        prepare: true,
      },
    );
    expect(read.rows).toEqual([{ n: 3 }]);
  });

  it("reports a failing statement and runs it again afterwards", async () => {
    await expect(db.query(INSERT, values("plain"), { prepare: true })).rejects.toThrow(/duplicate key/);
    await expect(db.query("SELECT nope FROM things", [], { prepare: true })).rejects.toThrow(/nope/);
    const fixed = await db.query(INSERT, values("after the error"), { prepare: true });
    expect(fixed.rows[0]).toMatchObject({ name: "after the error" });
    await expect(db.query("SELECT nope FROM things", [], { prepare: true })).rejects.toThrow(/nope/);
  });

  it("runs inside a transaction, and waits for one running elsewhere instead of joining it", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let entered = () => {};
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const transaction = db
      .transaction(async (tx) => {
        await tx.query(INSERT, values("in a transaction"), { prepare: true });
        entered();
        await held;
        throw new Error("roll back");
      })
      .catch((error: Error) => error.message);
    await inside;
    // Outside the transaction: it must not see (or commit) the transaction's row.
    const outside = db.query<{ n: number }>(
      "SELECT count(*) AS n FROM things WHERE name = $1",
      ["in a transaction"],
      {
        prepare: true,
      },
    );
    release();
    expect(await transaction).toBe("roll back");
    expect((await outside).rows).toEqual([{ n: 0 }]);
  });
});

describe("textParam", () => {
  it("writes parameters as pg does: arrays as literals, objects as JSON, dates in ISO form", () => {
    expect(textParam(null)).toBeNull();
    expect(textParam(undefined)).toBeNull();
    expect(textParam(3)).toBe("3");
    expect(textParam(true)).toBe("true");
    expect(textParam({ a: 1 })).toBe('{"a":1}');
    expect(textParam(new Date("2026-01-02T03:04:05.000Z"))).toBe("2026-01-02T03:04:05.000Z");
    expect(textParam([1, null, [2, 3]])).toBe('{"1",NULL,{"2","3"}}');
    expect(textParam(['a"b', "c\\d"])).toBe('{"a\\"b","c\\\\d"}');
  });
});
