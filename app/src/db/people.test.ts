import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import { firstNoticeToday, interlocutorByIdentity, listInterlocutors, seedOwner } from "./people.js";

let testDb: MigratedTestDatabase;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("people");
}, 120_000);

afterAll(async () => {
  await testDb?.close();
});

describe("the owner's record, from [owner] at every start", () => {
  it("is created, then follows config.toml: name, identities, the main agent", async () => {
    const { db } = testDb;
    const id = await seedOwner(db, {
      name: "Ada",
      identities: [{ service: "telegram", identifier: "1001" }],
    });
    // Someone else already holds the number the owner adds, and the name the owner takes.
    await db.query(
      `WITH agent AS (INSERT INTO agents (name) VALUES ('helper') RETURNING id),
       person AS (INSERT INTO interlocutors (display_name, agent_id) SELECT 'Ada Lovelace', id FROM agent RETURNING id)
       INSERT INTO interlocutor_identities (interlocutor_id, service, identifier)
       SELECT id, 'signal', '+15550001111' FROM person`,
    );
    const again = await seedOwner(db, {
      name: "Ada Lovelace",
      identities: [{ service: "signal", identifier: "+15550001111" }],
    });
    expect(again).toBe(id);
    const people = await listInterlocutors(db);
    const owner = people.find((person) => person.owner);
    expect(owner).toMatchObject({
      display_name: "Ada Lovelace",
      agent_id: 1,
      enabled: true,
      identities: [{ service: "signal", identifier: "+15550001111" }],
    });
    // The old Telegram identity is gone (its row kept); the other person lost the owner's number and name.
    expect(await interlocutorByIdentity(db, "telegram", "1001")).toBeUndefined();
    const other = people.find((person) => !person.owner);
    expect(other?.display_name).toMatch(/^Ada Lovelace \(\d+\)$/);
    expect(other?.identities).toEqual([]);
    const rows = await db.query("SELECT 1 FROM interlocutor_identities WHERE identifier IS NULL");
    expect(rows.rows.length).toBe(2);
    // The same config again changes nothing.
    const before = await db.query("SELECT count(*)::int AS n FROM interlocutor_identities");
    await seedOwner(db, {
      name: "Ada Lovelace",
      identities: [{ service: "signal", identifier: "+15550001111" }],
    });
    expect((await db.query("SELECT count(*)::int AS n FROM interlocutor_identities")).rows).toEqual(
      before.rows,
    );
  });
});

describe("a notice about someone", () => {
  it("is due once per key and day", async () => {
    const { db } = testDb;
    expect(await firstNoticeToday(db, "unassigned:telegram:5", "2026-11-26")).toBe(true);
    expect(await firstNoticeToday(db, "unassigned:telegram:5", "2026-11-26")).toBe(false);
    expect(await firstNoticeToday(db, "unassigned:telegram:6", "2026-11-26")).toBe(true);
    expect(await firstNoticeToday(db, "unassigned:telegram:5", "2026-11-27")).toBe(true);
  });
});
