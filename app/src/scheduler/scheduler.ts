import { errorMessage, type Logger } from "@stavrobot/common";
import type { Database } from "../db/database.js";
import { isDatabaseUnavailable } from "../db/database.js";
import { listCronEntries, type CronEntry } from "../db/cron.js";
import { InboxStore, type InboxEntry } from "../db/inbox.js";
import { systemClock, type Clock } from "./clock.js";
import { nextOccurrence } from "./schedule.js";

/** Timers are re-armed at least this often, so a long sleep never drifts or overflows. */
const MAX_SLEEP_MS = 60 * 60_000;

export interface SchedulerDeps {
  db: Database;
  /** The owner's time zone: cron expressions are read in it. */
  timezone: string;
  /** The app's inbox (firings are saved with it, inside their transaction); default: a new one. */
  inbox?: InboxStore;
  /** Periodic work (removing old files), run at start and then every `housekeepingEveryMs`. */
  housekeeping?: () => Promise<void>;
  housekeepingEveryMs?: number;
  clock?: Clock;
  logger: Logger;
}

/** The text of a firing, as the reference words it. */
export function cronMessage(entry: Pick<CronEntry, "id" | "note">): string {
  return (
    `[Cron entry ${entry.id} has fired] ${entry.note}\n\n` +
    "This is a scheduled reminder that has just triggered. Act on the note above directly (e.g. send a " +
    "message, update a memory). Do not create new cron entries in response to this."
  );
}

/**
 * Fires cron entries on time. It sleeps until the next due entry (re-armed whenever entries
 * change), instead of polling every minute. Each firing is one transaction that records it (a
 * one-shot is deleted; a recurring entry's `last_fired_for` is set to the scheduled time) and
 * saves the message in the inbox, so a crash can neither lose a firing nor fire one scheduled
 * time twice. A one-shot that came due while the app was down fires once at start; a recurring
 * entry's times missed while down are skipped.
 */
export class Scheduler {
  private readonly clock: Clock;
  /** When each entry next fires, by id. */
  private next = new Map<number, { entry: CronEntry; at: number }>();
  private timer: unknown;
  private housekeepingTimer: unknown;
  private work: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Queues an inbox entry a firing saved (given at start: the queue exists by then). */
  private accept: (entry: InboxEntry) => void = () => {};

  constructor(private readonly deps: SchedulerDeps) {
    this.clock = deps.clock ?? systemClock;
  }

  /** Fires what is due from now on, handing each firing's saved entry to `accept`. */
  async start(accept: (entry: InboxEntry) => void): Promise<void> {
    this.accept = accept;
    this.stopped = false;
    await this.reload();
    this.runHousekeeping();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    if (this.housekeepingTimer !== undefined) this.clock.clearTimeout(this.housekeepingTimer);
  }

  /** Rereads the entries (after any change to them) and fires what is due. */
  reload(): Promise<void> {
    return this.serial(async () => {
      const now = this.clock.now();
      const next = new Map<number, { entry: CronEntry; at: number }>();
      for (const entry of await listCronEntries(this.deps.db)) {
        const at = this.firstFire(entry, now);
        if (at !== undefined) next.set(entry.id, { entry, at });
      }
      this.next = next;
      await this.fireDue();
    });
  }

  /** Resolves when no firing or reload is under way (for tests and shutdown). */
  idle(): Promise<void> {
    return this.work;
  }

  /** When each entry fires next (for `manage_cron list`). */
  upcoming(): Map<number, Date> {
    return new Map([...this.next].map(([id, { at }]) => [id, new Date(at)]));
  }

  private firstFire(entry: CronEntry, now: number): number | undefined {
    if (entry.fireAt) return entry.fireAt.getTime();
    if (!entry.cronExpression) return undefined;
    const after = Math.max(now, entry.lastFiredFor?.getTime() ?? 0);
    try {
      return nextOccurrence(entry.cronExpression, new Date(after), this.deps.timezone).getTime();
    } catch (error) {
      this.deps.logger.error("invalid cron expression; the entry will not fire", {
        id: entry.id,
        error: errorMessage(error),
      });
      return undefined;
    }
  }

  private serial(task: () => Promise<void>): Promise<void> {
    const run = this.work.then(task, task).catch((error: unknown) => {
      this.deps.logger.error("scheduler failed", { error: errorMessage(error) });
      this.arm(isDatabaseUnavailable(error) ? 5_000 : undefined);
    });
    this.work = run;
    return run;
  }

  private async fireDue(): Promise<void> {
    const now = this.clock.now();
    const due = [...this.next.values()].filter((item) => item.at <= now).sort((a, b) => a.at - b.at);
    for (const item of due) {
      if (this.stopped) return;
      await this.fire(item.entry, item.at);
      if (item.entry.cronExpression) {
        const at = nextOccurrence(
          item.entry.cronExpression,
          new Date(Math.max(item.at, now)),
          this.deps.timezone,
        );
        this.next.set(item.entry.id, {
          entry: { ...item.entry, lastFiredFor: new Date(item.at) },
          at: at.getTime(),
        });
      } else {
        this.next.delete(item.entry.id);
      }
    }
    this.arm();
  }

  /** Records the firing and saves its message in one transaction; queues the message after commit. */
  private async fire(entry: CronEntry, scheduledFor: number): Promise<void> {
    const saved = await this.deps.db.transaction(async (tx) => {
      const claimed = entry.cronExpression
        ? await tx.query(
            `UPDATE cron_entries SET last_fired_for = $2
             WHERE id = $1 AND cron_expression = $3 AND (last_fired_for IS NULL OR last_fired_for < $2)`,
            [entry.id, new Date(scheduledFor), entry.cronExpression],
          )
        : await tx.query("DELETE FROM cron_entries WHERE id = $1 AND fire_at = $2", [entry.id, entry.fireAt]);
      if (claimed.rowCount === 0) return undefined; // Changed, deleted or already fired meanwhile.
      const inbox = (this.deps.inbox ?? new InboxStore(this.deps.db)).within(tx);
      // The source names the entry (`cron:<id>`): the Schedule page finds each entry's last result
      // and cost by it. The note is the reminder as the owner knows it: their notification's title.
      // A reminder set after outside text keeps saying where it came from (trust/gate.ts).
      const payload = {
        message: cronMessage(entry),
        attachments: [],
        title: entry.note,
        ...(entry.provenance ? { outside: entry.provenance } : {}),
      };
      return (await inbox.add(`cron:${entry.id}`, null, payload)).entry;
    });
    if (!saved) return;
    this.deps.logger.info("cron entry fired", {
      id: entry.id,
      scheduledFor: new Date(scheduledFor).toISOString(),
    });
    this.accept(saved);
  }

  private arm(retryMs?: number): void {
    if (this.stopped) return;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    const soonest = Math.min(...[...this.next.values()].map((item) => item.at));
    const wait =
      retryMs ?? (Number.isFinite(soonest) ? Math.max(0, soonest - this.clock.now()) : MAX_SLEEP_MS);
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = undefined;
        void this.serial(() => this.fireDue());
      },
      Math.min(wait, MAX_SLEEP_MS),
    );
  }

  private runHousekeeping(): void {
    const { housekeeping } = this.deps;
    if (!housekeeping || this.stopped) return;
    void housekeeping().catch((error: unknown) =>
      this.deps.logger.warn("housekeeping failed", { error: errorMessage(error) }),
    );
    this.housekeepingTimer = this.clock.setTimeout(
      () => this.runHousekeeping(),
      this.deps.housekeepingEveryMs ?? 60 * 60_000,
    );
  }
}
