import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import type { Queryable, QueryResult } from "./database.js";
import { InboxStore } from "./inbox.js";

let testDb: MigratedTestDatabase;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("inbox");
}, 120_000);

afterAll(async () => {
  await testDb?.close();
});

const payload = (message: string) => ({ message, attachments: [] });

/**
 * The database, as a server answering inserts that run side by side: the answer to the next
 * insert can be held back (after it ran) until released, or the next insert refused.
 */
function wire() {
  const inserts: string[] = [];
  let hold: { reached: () => void; released: Promise<void> } | undefined;
  let refuse = false;
  const db: Queryable = {
    async query<R>(
      sql: string,
      params?: unknown[],
      options?: { prepare?: boolean },
    ): Promise<QueryResult<R>> {
      if (!sql.includes("INSERT INTO inbox")) return testDb.db.query<R>(sql, params, options);
      inserts.push(sql);
      if (refuse) {
        refuse = false;
        throw new Error("refused");
      }
      const result = await testDb.db.query<R>(sql, params, options);
      const held = hold;
      hold = undefined;
      if (held) {
        held.reached();
        await held.released;
      }
      return result;
    },
  };
  return {
    db,
    inserts,
    /** Holds the next insert's answer; resolves once it ran, with the release. */
    holdNext(): Promise<() => void> {
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      return new Promise((resolve) => (hold = { reached: () => resolve(release), released }));
    },
    refuseNext: () => (refuse = true),
  };
}

describe("InboxStore under inserts that run side by side", () => {
  it("gives a message started while saved an id newer than every entry already saved", async () => {
    const server = wire();
    const inbox = new InboxStore(server.db);
    await inbox.drawAhead();
    // The first insert draws its id and the next one first, but its answer comes last.
    const held = server.holdNext();
    const slow = inbox.add("cli", null, payload("slow"));
    const release = await held;
    const fast = await inbox.add("cli", null, payload("fast"));
    release();
    const saved = [(await slow).entry.id, fast.entry.id];

    const started = inbox.reserve("cli", null, payload("started while saved"));
    if (!started) throw new Error("no id at hand");
    await started.saved;
    expect(started.entry.id).toBeGreaterThan(Math.max(...saved));
  });

  it("lets the received flags ride one insert at a time, and keeps them when it fails", async () => {
    const server = wire();
    const inbox = new InboxStore(server.db);
    const { entry: answered } = await inbox.add("cli", null, payload("answered"));
    inbox.noteSeen([answered.id]);
    const carrying = () => server.inserts.filter((sql) => sql.includes("SET seen = true")).length;

    server.refuseNext();
    await expect(inbox.add("cli", null, payload("refused"))).rejects.toThrow("refused");
    expect(carrying()).toBe(1);
    expect(await flagOf(answered.id)).toBe(false);

    // Two inserts side by side: the flag rides only the first (on a server, two statements
    // updating the same rows, each in its own order, deadlock).
    const held = server.holdNext();
    const first = inbox.add("cli", null, payload("one"));
    const release = await held;
    await inbox.add("cli", null, payload("two"));
    release();
    await first;
    expect(carrying()).toBe(2);
    expect(await flagOf(answered.id)).toBe(true);
  });
});

async function flagOf(id: number): Promise<boolean> {
  const result = await testDb.db.query<{ seen: boolean }>("SELECT seen FROM inbox WHERE id = $1", [id]);
  return result.rows[0]!.seen;
}
