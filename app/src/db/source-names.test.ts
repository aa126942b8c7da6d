import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import { cronMessage } from "../scheduler/scheduler.js";
import { migrate, migrations } from "./migrations.js";

let testDb: MigratedTestDatabase;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("source-names");
}, 120_000);

afterAll(async () => {
  await testDb?.close();
});

const VERSION = 7;

describe("migration 7: one name for a message's source", () => {
  it("is the migration that names the sources", () => {
    expect(migrations.find((migration) => migration.version === VERSION)?.name).toMatch(/one name/);
  });

  it("renames what earlier versions stored: the terminal's messages become cli, a firing names its entry", async () => {
    const { db } = testDb;
    // Rows as versions before 7 stored them.
    const add = async (source: string | null, message: string): Promise<number> =>
      (
        await db.query<{ id: number }>(
          "INSERT INTO inbox (source, payload, status) VALUES ($1, $2, 'done') RETURNING id",
          [source, JSON.stringify({ message, attachments: [] })],
        )
      ).rows[0]!.id;
    const terminal = await add(null, "what is on today?");
    const firing = await add("cron", cronMessage({ id: 42, note: "water the plants" }));
    const oddCron = await add("cron", "a cron message in no known form");
    const telegram = await add("telegram", "hi");
    const usage = async (kind: string, source: string | null, inboxId: number | null): Promise<number> =>
      (
        await db.query<{ id: number }>(
          "INSERT INTO usage (kind, source, inbox_id, model) VALUES ($1, $2, $3, 'm') RETURNING id",
          [kind, source, inboxId],
        )
      ).rows[0]!.id;
    const terminalTurn = await usage("turn", null, terminal);
    const firingTurn = await usage("turn", "cron", firing);
    const compaction = await usage("compaction", null, null);
    const telegramTurn = await usage("turn", "telegram", telegram);
    await db.query("DELETE FROM schema_version WHERE version = $1", [VERSION]);

    expect(await migrate(db)).toBe(1);

    const sources = new Map(
      (await db.query<{ id: number; source: string | null }>("SELECT id, source FROM inbox")).rows.map(
        (row) => [row.id, row.source],
      ),
    );
    expect(sources.get(terminal)).toBe("cli");
    expect(sources.get(firing)).toBe("cron:42");
    expect(sources.get(oddCron)).toBe("cron");
    expect(sources.get(telegram)).toBe("telegram");
    const usageSources = new Map(
      (await db.query<{ id: number; source: string | null }>("SELECT id, source FROM usage")).rows.map(
        (row) => [row.id, row.source],
      ),
    );
    expect(usageSources.get(terminalTurn)).toBe("cli");
    expect(usageSources.get(firingTurn)).toBe("cron:42");
    expect(usageSources.get(compaction)).toBeNull();
    expect(usageSources.get(telegramTurn)).toBe("telegram");
  });
});
