/** Creating a formatter costs far more than using one: one per time zone, shared by every user. */
const formats = new Map<string, Intl.DateTimeFormat>();

/** Parts of the date in the given time zone (weekday "Sat", year, month, day, hour 00–23, minute, second). */
export function zonedParts(date: Date, timezone: string): Record<string, string> {
  let format = formats.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-GB", {
      timeZone: timezone,
      weekday: "short",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
    });
    formats.set(timezone, format);
  }
  const out: Record<string, string> = {};
  for (const part of format.formatToParts(date)) out[part.type] = part.value;
  return out;
}

/** "Sat 2026-11-21 23:55:02" in the given time zone. */
export function formatLocalTime(date: Date, timezone: string): string {
  const p = zonedParts(date, timezone);
  return `${p.weekday} ${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
}
