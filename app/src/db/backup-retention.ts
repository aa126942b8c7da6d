/**
 * Which backups to delete. The one statement of the rule; `scripts/backup-retention.sh` does the
 * same for the pg-backup container, and app/test/backup.test.ts checks that both agree.
 *
 * Kept: the 30 newest backups; the newest backup of each of the last 12 calendar months (the
 * current month included, UTC); the newest backup of every year, forever. Everything else goes.
 * Only names this project writes are considered; any other file is never deleted.
 */

export const KEEP_NEWEST = 30;
export const KEEP_MONTHS = 12;

/**
 * `stavrobot-YYYY-MM-DDTHH-MM-SSZ.sql.gz` (pg_dump) or `...Z.pglite.tar.gz` (embedded). Both kinds
 * count as one series, so after switching database kinds the old kind ages out like any backup.
 */
export const BACKUP_NAME =
  /^stavrobot-(\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3])-[0-5]\d-[0-5]\d)Z\.(?:sql\.gz|pglite\.tar\.gz)$/;

interface Backup {
  name: string;
  /** `YYYY-MM-DDTHH-MM-SS`: sorts in time order as a string. */
  stamp: string;
}

/** The backup name for a moment, in UTC; `suffix` is `sql.gz` or `pglite.tar.gz`. */
export function backupName(now: Date, suffix: string): string {
  const stamp = now.toISOString().slice(0, 19).replaceAll(":", "-");
  return `stavrobot-${stamp}Z.${suffix}`;
}

/** The names among `names` to delete at `now`, oldest first. */
export function backupsToDelete(names: string[], now: Date): string[] {
  const backups = parseBackups(names).sort(newestFirst);
  const currentMonth = monthIndex(now.getUTCFullYear(), now.getUTCMonth() + 1);
  const seenMonths = new Set<string>();
  const seenYears = new Set<string>();
  const doomed: string[] = [];
  backups.forEach((backup, position) => {
    const year = backup.stamp.slice(0, 4);
    const month = backup.stamp.slice(0, 7);
    const newestOfYear = !seenYears.has(year);
    const newestOfMonth = !seenMonths.has(month);
    seenYears.add(year);
    seenMonths.add(month);
    const age = currentMonth - monthIndex(Number(year), Number(backup.stamp.slice(5, 7)));
    const inMonthWindow = age >= 0 && age < KEEP_MONTHS;
    const keep = position < KEEP_NEWEST || newestOfYear || (newestOfMonth && inMonthWindow);
    if (!keep) doomed.push(backup.name);
  });
  return doomed.reverse();
}

function parseBackups(names: string[]): Backup[] {
  return [...new Set(names)].flatMap((name) => {
    const stamp = BACKUP_NAME.exec(name)?.[1];
    return stamp ? [{ name, stamp }] : [];
  });
}

/** Newest first; two backups from the same second are ordered by name, as `LC_ALL=C sort -r` does. */
function newestFirst(a: Backup, b: Backup): number {
  if (a.stamp !== b.stamp) return a.stamp < b.stamp ? 1 : -1;
  return a.name < b.name ? 1 : a.name > b.name ? -1 : 0;
}

function monthIndex(year: number, month: number): number {
  return year * 12 + month - 1;
}
