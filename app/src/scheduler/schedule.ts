import { CronExpressionParser } from "cron-parser";

/** The next time a cron expression fires strictly after `after`, in the owner's time zone. */
export function nextOccurrence(expression: string, after: Date, timezone: string): Date {
  return CronExpressionParser.parse(expression, { currentDate: after, tz: timezone }).next().toDate();
}

/** Why an expression is not a valid cron expression, or undefined when it is. */
export function cronError(expression: string, timezone: string): string | undefined {
  const fields = expression.trim().split(/\s+/);
  if (fields.length < 5 || fields.length > 6) {
    return `"${expression}" is not a cron expression: use five fields (minute hour day-of-month month day-of-week), e.g. "0 9 * * 1-5"`;
  }
  try {
    nextOccurrence(expression, new Date(), timezone);
    return undefined;
  } catch (error) {
    return `"${expression}" is not a valid cron expression: ${(error as Error).message}`;
  }
}

/**
 * An ISO 8601 date-time. With an offset (`Z`, `+02:00`) it is that instant; without one it is a
 * wall-clock time in the owner's time zone (what a person means by "at 9:00").
 */
export function parseDateTime(text: string, timezone: string): Date | undefined {
  const trimmed = text.trim();
  const match =
    /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/i.exec(trimmed);
  if (!match) return undefined;
  if (match[7]) {
    const date = new Date(trimmed.replace(" ", "T"));
    return Number.isNaN(date.getTime()) ? undefined : date;
  }
  const [year, month, day, hour, minute, second] = match
    .slice(1, 7)
    .map((part) => Number(part ?? 0)) as number[];
  const wall = Date.UTC(year!, month! - 1, day!, hour!, minute!, second!);
  // The zone's offset at that wall time: guess, then correct once (enough across DST changes).
  let instant = wall - offsetAt(wall, timezone);
  instant = wall - offsetAt(instant, timezone);
  const date = new Date(instant);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** The zone's offset from UTC (ms) at an instant. */
function offsetAt(instant: number, timezone: string): number {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone: timezone,
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  }).formatToParts(new Date(instant));
  const get = (type: string) => Number(parts.find((part) => part.type === type)?.value ?? 0);
  const asUtc = Date.UTC(
    get("year"),
    get("month") - 1,
    get("day"),
    get("hour"),
    get("minute"),
    get("second"),
  );
  return asUtc - Math.floor(instant / 1000) * 1000;
}
