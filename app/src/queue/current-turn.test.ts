import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bothDatabases } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import type { InboxEntry } from "../db/inbox.js";
import { CurrentTurn } from "./current-turn.js";

/**
 * Whether SQL wrote, from the transaction ids of the writes around it, on real databases. On a
 * server, ids count across all its databases (other test files write meanwhile), so "nothing
 * written" is asserted on the embedded database only, which nothing else shares; "written" must
 * hold on both.
 */
const kinds = bothDatabases("xid");

const ENTRY = { id: 1 } as InboxEntry;

describe.each(kinds)("SQL's writes on %s", (kind, open) => {
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

  /** A write of the turn's own, as a conversation save is: the id of its transaction. */
  async function ownWrite(turn: CurrentTurn): Promise<void> {
    const row = await db.query<{ xmin: string }>("INSERT INTO notes (text) VALUES ('own') RETURNING xmin");
    turn.wrote(Number(row.rows[0]?.xmin));
  }

  /** Whether the copies are checked after `script` ran between two writes of the turn. */
  async function checkedAfter(script: string): Promise<boolean> {
    const turn = new CurrentTurn();
    turn.set(ENTRY);
    await ownWrite(turn);
    let checked = false;
    turn.sqlRan(() => (checked = true));
    await db.executeScript(script);
    await ownWrite(turn);
    return checked;
  }

  it("checks after writes of any kind: a statement, a function a SELECT calls, DDL, a rollback", async () => {
    for (const script of [
      "INSERT INTO notes (text) VALUES ('plain')",
      "SELECT add_note()",
      "CREATE TABLE other (id int)",
      "UPDATE notes SET text = 'x' WHERE id = 1; SELECT 1",
      "BEGIN; INSERT INTO notes (text) VALUES ('no'); ROLLBACK",
    ])
      expect(await checkedAfter(script), script).toBe(true);
  });

  it.skipIf(kind !== "pglite")("does not check after reads", async () => {
    for (const script of [
      "SELECT * FROM notes",
      "SELECT 1; SELECT count(*) FROM notes",
      "SHOW server_version",
    ])
      expect(await checkedAfter(script), script).toBe(false);
  });

  it("checks when no write came before the SQL, or none after it before the turn ended", async () => {
    const fresh = new CurrentTurn();
    let checked = 0;
    fresh.sqlRan(() => checked++);
    expect(checked).toBe(1);

    const turn = new CurrentTurn();
    turn.set(ENTRY);
    await ownWrite(turn);
    turn.sqlRan(() => checked++);
    await db.executeScript("SELECT 1");
    turn.set(undefined);
    expect(checked).toBe(2);
  });
});
