import { zonedParts } from "../zoned-date.js";
import type { Queryable, StatementPart } from "../db/database.js";

/** Tokens and cost of one model call (or several, summed). */
export interface Spend {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

export type UsageKind = "turn" | "compaction" | "web_search" | "web_fetch";

/** One model call as it is recorded. */
export interface UsageRecord extends Spend {
  kind: UsageKind;
  model: string;
  /** The source of the turn it served (`cli`, `telegram`, `plugin:x/y`…); none for compaction. */
  source?: string | null;
  /** The plugin whose result started the turn, if one did. */
  plugin?: string | null;
  inboxId?: number | null;
}

export interface BudgetLimits {
  /** US dollars per day (the owner's time zone), or none. */
  daily?: number | undefined;
  /** US dollars per calendar month, or none. */
  monthly?: number | undefined;
}

/** A budget that is used up: no model call until `resetsAt`. */
export interface BudgetRefusal {
  period: "daily" | "monthly";
  limitUsd: number;
  spentUsd: number;
  resetsAt: Date;
  /** For the person whose turn is refused. */
  message: string;
}

const COLUMNS = [
  "kind",
  "source",
  "plugin",
  "inbox_id",
  "model",
  "input_tokens",
  "output_tokens",
  "cache_read_tokens",
  "cache_write_tokens",
  "cost_usd",
] as const;

const INBOX_COLUMN = COLUMNS.indexOf("inbox_id");

/** The plugin named by a `plugin:<name>/<tool>` source. */
export function pluginOfSource(source: string | null | undefined): string | null {
  const match = /^plugin:([a-z0-9-]+)\//.exec(source ?? "");
  return match?.[1] ?? null;
}

/**
 * Records what every model call costs (the `usage` table) and keeps today's and this month's
 * spending in memory, so checking a budget before a call costs nothing. Days and months are the
 * owner's (`TZ`). The sums are read from the table once, at start-up.
 */
export class UsageMeter {
  private day = "";
  private month = "";
  /** The day's keys above hold from `dayStart` (when they were computed) until `nextDayStart`. */
  private dayStart = 0;
  private nextDayStart = 0;
  private spentToday = 0;
  private spentThisMonth = 0;
  private pending: unknown[][] = [];
  /** Inbox entries that were never saved (see `unlink`). */
  private readonly unsaved = new Set<number>();

  constructor(
    private readonly db: Queryable,
    readonly limits: BudgetLimits,
    private readonly timezone: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Reads today's and this month's spending (once, at start-up). */
  async start(): Promise<void> {
    await this.load();
  }

  /**
   * Counts a call at once (budgets see it before the next call) and keeps its row until `flush()`,
   * which the queue runs after each turn: the turn's own database work is not slowed by it.
   */
  record(entry: UsageRecord): void {
    this.rollOver();
    this.pending.push([
      entry.kind,
      entry.source ?? null,
      entry.plugin ?? pluginOfSource(entry.source),
      entry.inboxId ?? null,
      entry.model,
      Math.round(entry.inputTokens),
      Math.round(entry.outputTokens),
      Math.round(entry.cacheReadTokens),
      Math.round(entry.cacheWriteTokens),
      entry.costUsd,
    ]);
    this.spentToday += entry.costUsd;
    this.spentThisMonth += entry.costUsd;
  }

  /**
   * The entry's calls keep their cost but lose their link to it: its message was never saved (its
   * insert failed while the model answered), and a row pointing at it would fail every write.
   */
  unlink(inboxId: number): void {
    this.unsaved.add(inboxId);
  }

  /** Writes the recorded calls (one statement); kept for the next flush if it fails. */
  async flush(): Promise<void> {
    await this.writeWith(async (parts) => {
      const part = parts[0];
      if (part) await this.db.query(part.sql(1), part.params);
    });
  }

  /**
   * Hands the recorded calls, as a statement part, to a write that carries them in its own
   * statement (a turn's end: no commit of their own); kept for the next write if it fails.
   */
  async writeWith<T>(write: (parts: StatementPart[]) => Promise<T>): Promise<T> {
    const rows = this.pending;
    this.pending = [];
    const parts: StatementPart[] = rows.length === 0 ? [] : [insertRows(rows.map((row) => this.linked(row)))];
    try {
      return await write(parts);
    } catch (error) {
      this.pending = [...rows, ...this.pending];
      throw error;
    }
  }

  private linked(row: unknown[]): unknown[] {
    if (this.unsaved.size === 0 || !this.unsaved.has(row[INBOX_COLUMN] as number)) return row;
    const copy = [...row];
    copy[INBOX_COLUMN] = null;
    return copy;
  }

  /** Spending so far in the current day and month, in US dollars. */
  spent(): { daily: number; monthly: number } {
    this.rollOver();
    return { daily: this.spentToday, monthly: this.spentThisMonth };
  }

  /** Why a model call may not be made now, or undefined when it may. */
  refusal(): BudgetRefusal | undefined {
    const spent = this.spent();
    const { daily, monthly } = this.limits;
    if (monthly !== undefined && spent.monthly >= monthly) {
      return this.describe("monthly", monthly, spent.monthly, startOfNextMonth(this.now(), this.timezone));
    }
    if (daily !== undefined && spent.daily >= daily) {
      return this.describe("daily", daily, spent.daily, startOfNextDay(this.now(), this.timezone));
    }
    return undefined;
  }

  private describe(
    period: "daily" | "monthly",
    limitUsd: number,
    spentUsd: number,
    resetsAt: Date,
  ): BudgetRefusal {
    const when = resetsAt.toLocaleString("en-GB", {
      timeZone: this.timezone,
      dateStyle: "medium",
      timeStyle: "short",
    });
    return {
      period,
      limitUsd,
      spentUsd,
      resetsAt,
      message:
        `The ${period} budget of $${limitUsd.toFixed(2)} is used up ($${spentUsd.toFixed(2)} spent), so the assistant ` +
        `makes no more model calls until ${when}. Raise [budget] ${period} in config.toml to continue sooner.`,
    };
  }

  /** A new day or month starts from zero (this process is the table's only writer). */
  private rollOver(): void {
    const now = this.now();
    // Time-zone arithmetic is costly and runs before every model call: only once a day passed.
    if (now.getTime() >= this.dayStart && now.getTime() < this.nextDayStart) return;
    const keys = dayAndMonth(now, this.timezone);
    if (keys.day !== this.day) this.spentToday = 0;
    if (keys.month !== this.month) this.spentThisMonth = 0;
    this.day = keys.day;
    this.month = keys.month;
    this.dayStart = now.getTime();
    this.nextDayStart = startOfNextDay(now, this.timezone).getTime();
  }

  private async load(): Promise<void> {
    const keys = dayAndMonth(this.now(), this.timezone);
    const result = await this.db.query<{ today: number | null; month: number | null }>(
      `SELECT sum(cost_usd) FILTER (WHERE to_char(at AT TIME ZONE $1, 'YYYY-MM-DD') = $2) AS today,
              sum(cost_usd) AS month
       FROM usage WHERE to_char(at AT TIME ZONE $1, 'YYYY-MM') = $3`,
      [this.timezone, keys.day, keys.month],
    );
    this.day = keys.day;
    this.month = keys.month;
    this.spentToday = Number(result.rows[0]?.today ?? 0);
    this.spentThisMonth = Number(result.rows[0]?.month ?? 0);
  }
}

function insertRows(rows: unknown[][]): StatementPart {
  return {
    sql: (p) => {
      const values = rows.map(
        (_, r) => `(${COLUMNS.map((_, c) => `$${p + r * COLUMNS.length + c}`).join(", ")})`,
      );
      return `INSERT INTO usage (${COLUMNS.join(", ")}) VALUES ${values.join(", ")}`;
    },
    params: rows.flat(),
  };
}

export function dayAndMonth(date: Date, timezone: string): { day: string; month: string } {
  const p = zonedParts(date, timezone);
  return { day: `${p.year}-${p.month}-${p.day}`, month: `${p.year}-${p.month}` };
}

/** The instant a wall-clock time in `timezone` happens (to the minute, DST-safe enough for a budget). */
function zonedInstant(year: number, month: number, day: number, timezone: string): Date {
  const guess = new Date(Date.UTC(year, month - 1, day));
  const p = zonedParts(guess, timezone);
  const shown = Date.UTC(
    Number(p.year),
    Number(p.month) - 1,
    Number(p.day),
    Number(p.hour),
    Number(p.minute),
  );
  return new Date(guess.getTime() - (shown - guess.getTime()));
}

export function startOfNextDay(now: Date, timezone: string): Date {
  const p = zonedParts(now, timezone);
  return zonedInstant(Number(p.year), Number(p.month), Number(p.day) + 1, timezone);
}

export function startOfNextMonth(now: Date, timezone: string): Date {
  const p = zonedParts(now, timezone);
  return zonedInstant(Number(p.year), Number(p.month) + 1, 1, timezone);
}
