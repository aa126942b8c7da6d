import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import { createCronEntry } from "../db/cron.js";
import type { InboxEntry } from "../db/inbox.js";
import { ManualClock } from "./clock.js";
import { Scheduler, cronMessage } from "./scheduler.js";
import { parseDateTime } from "./schedule.js";

let testDb: MigratedTestDatabase;
let db: Database;
const MINUTE = 60_000;
const T0 = Date.parse("2026-11-22T08:59:30Z");

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("scheduler");
  db = testDb.db;
}, 120_000);

beforeEach(async () => {
  await db.query("TRUNCATE inbox, cron_entries RESTART IDENTITY CASCADE");
});

afterAll(async () => {
  await testDb?.close();
});

/** A scheduler whose firings are collected in `accepted` once it is started (`start()`). */
function scheduler(clock: ManualClock, accepted: InboxEntry[]): Scheduler & { start(): Promise<void> } {
  const made = new Scheduler({ db, timezone: "Europe/Berlin", clock, logger: silentLogger });
  const start = made.start.bind(made);
  return Object.assign(made, { start: () => start((entry: InboxEntry) => void accepted.push(entry)) });
}

async function advance(clock: ManualClock, s: Scheduler, ms: number): Promise<void> {
  // Timers fire synchronously; their work is serial and asynchronous.
  for (let step = 0; step < ms; step += 15_000) {
    clock.advance(Math.min(15_000, ms - step));
    await s.idle();
    await s.idle();
  }
}

const inboxRows = async () =>
  (
    await db.query<{ source: string; payload: { message: string } }>(
      "SELECT source, payload FROM inbox ORDER BY id",
    )
  ).rows;

describe("Scheduler", () => {
  it("fires a one-shot once, at its time, and deletes it", async () => {
    const id = await createCronEntry(db, {
      cronExpression: null,
      fireAt: new Date(T0 + 60_000),
      note: "call mum",
    });
    const clock = new ManualClock(T0);
    const accepted: InboxEntry[] = [];
    const s = scheduler(clock, accepted);
    await s.start();
    await advance(clock, s, 45_000);
    expect(accepted).toHaveLength(0);
    await advance(clock, s, 30_000);
    expect(accepted).toHaveLength(1);
    expect(accepted[0]?.source).toBe(`cron:${id}`);
    expect(accepted[0]?.payload.message).toBe(cronMessage({ id, note: "call mum" }));
    expect((await db.query("SELECT 1 FROM cron_entries")).rows).toHaveLength(0);
    await advance(clock, s, 10 * MINUTE);
    expect(accepted).toHaveLength(1);
    s.stop();
  });

  it("fires a recurring entry on schedule in the owner's time zone, and never twice for one time across a restart", async () => {
    // 10:00 in Berlin is 09:00 UTC in November.
    const standUp = await createCronEntry(db, {
      cronExpression: "0 10 * * *",
      fireAt: null,
      note: "stand-up",
    });
    const clock = new ManualClock(T0);
    const accepted: InboxEntry[] = [];
    const first = scheduler(clock, accepted);
    await first.start();
    await advance(clock, first, MINUTE);
    expect(accepted).toHaveLength(1);
    first.stop();
    // Restarts at the scheduled time itself, and before it (a crash right after the firing, a clock
    // stepped back): only the firing recorded in the database keeps that time from firing again.
    const fireTime = T0 + 30_000; // 09:00 UTC
    const atFireTime = new ManualClock(fireTime);
    const second = scheduler(atFireTime, accepted);
    await second.start();
    await advance(atFireTime, second, 2 * MINUTE);
    expect(accepted).toHaveLength(1);
    second.stop();
    const earlier = new ManualClock(fireTime - 20_000);
    const third = scheduler(earlier, accepted);
    await third.start();
    await advance(earlier, third, 2 * MINUTE);
    expect(accepted).toHaveLength(1);
    // The next day it fires again.
    await advance(earlier, third, 24 * 60 * MINUTE);
    expect(accepted).toHaveLength(2);
    expect((await inboxRows()).map((row) => row.source)).toEqual([`cron:${standUp}`, `cron:${standUp}`]);
    third.stop();
  });

  it("fires once at start a one-shot that came due while the app was down, and skips missed recurring times", async () => {
    await createCronEntry(db, {
      cronExpression: null,
      fireAt: new Date(T0 - 3 * 60 * MINUTE),
      note: "missed",
    });
    await createCronEntry(db, { cronExpression: "*/30 * * * *", fireAt: null, note: "half-hourly" });
    const clock = new ManualClock(T0);
    const accepted: InboxEntry[] = [];
    const s = scheduler(clock, accepted);
    await s.start();
    expect(accepted.map((entry) => entry.payload.message)).toEqual([expect.stringContaining("missed")]);
    await advance(clock, s, 35_000);
    expect(accepted).toHaveLength(2);
    expect(accepted[1]?.payload.message).toContain("half-hourly");
    s.stop();
  });

  it("re-arms on every change: a new entry fires within seconds of its time", async () => {
    const clock = new ManualClock(T0);
    const accepted: InboxEntry[] = [];
    const s = scheduler(clock, accepted);
    await s.start();
    await createCronEntry(db, { cronExpression: null, fireAt: new Date(T0 + 5_000), note: "soon" });
    await s.reload();
    clock.advance(5_000);
    await s.idle();
    await s.idle();
    expect(accepted).toHaveLength(1);
    s.stop();
  });
});

describe("parseDateTime", () => {
  it("reads an offset as given and a bare wall-clock time in the owner's zone, across DST", () => {
    expect(parseDateTime("2026-12-24T18:00:00Z", "Europe/Berlin")?.toISOString()).toBe(
      "2026-12-24T18:00:00.000Z",
    );
    expect(parseDateTime("2026-12-24T18:00", "Europe/Berlin")?.toISOString()).toBe(
      "2026-12-24T17:00:00.000Z",
    );
    expect(parseDateTime("2026-07-01 09:30", "Europe/Berlin")?.toISOString()).toBe(
      "2026-07-01T07:30:00.000Z",
    );
    expect(parseDateTime("2026-07-01T09:30+05:30", "Europe/Berlin")?.toISOString()).toBe(
      "2026-07-01T04:00:00.000Z",
    );
    expect(parseDateTime("tomorrow", "Europe/Berlin")).toBeUndefined();
  });
});
