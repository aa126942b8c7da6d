import type { Queryable } from "./database.js";

export interface CronEntry {
  id: number;
  cronExpression: string | null;
  fireAt: Date | null;
  note: string;
  lastFiredFor: Date | null;
  /** Set in a turn that held outside text: where it came from (trust/gate.ts). */
  provenance: string | null;
}

interface CronRow {
  id: number;
  cron_expression: string | null;
  fire_at: Date | string | null;
  note: string;
  last_fired_for: Date | string | null;
  provenance: string | null;
}

const columns = "id, cron_expression, fire_at, note, last_fired_for, provenance";

function toEntry(row: CronRow): CronEntry {
  return {
    id: row.id,
    cronExpression: row.cron_expression,
    fireAt: row.fire_at === null ? null : new Date(row.fire_at),
    note: row.note,
    lastFiredFor: row.last_fired_for === null ? null : new Date(row.last_fired_for),
    provenance: row.provenance ?? null,
  };
}

export async function listCronEntries(db: Queryable): Promise<CronEntry[]> {
  return (await db.query<CronRow>(`SELECT ${columns} FROM cron_entries ORDER BY id`)).rows.map(toEntry);
}

export async function getCronEntry(db: Queryable, id: number): Promise<CronEntry | undefined> {
  const row = (await db.query<CronRow>(`SELECT ${columns} FROM cron_entries WHERE id = $1`, [id])).rows[0];
  return row ? toEntry(row) : undefined;
}

export async function createCronEntry(
  db: Queryable,
  entry: {
    cronExpression: string | null;
    fireAt: Date | null;
    note: string;
    provenance?: string | undefined;
  },
): Promise<number> {
  const result = await db.query<{ id: number }>(
    "INSERT INTO cron_entries (cron_expression, fire_at, note, provenance) VALUES ($1, $2, $3, $4) RETURNING id",
    [entry.cronExpression, entry.fireAt, entry.note, entry.provenance ?? null],
  );
  return (result.rows[0] as { id: number }).id;
}

/** Replaces the schedule (and forgets when it last fired) and/or the note. */
export async function updateCronEntry(
  db: Queryable,
  id: number,
  changes: { cronExpression?: string | null; fireAt?: Date | null; note?: string },
  /** A label stays once set (trust/gate.ts). */
  provenance?: string,
): Promise<boolean> {
  const schedule = changes.cronExpression !== undefined || changes.fireAt !== undefined;
  const result = await db.query(
    `UPDATE cron_entries SET
       cron_expression = CASE WHEN $2 THEN $3 ELSE cron_expression END,
       fire_at = CASE WHEN $2 THEN $4::timestamptz ELSE fire_at END,
       last_fired_for = CASE WHEN $2 THEN NULL ELSE last_fired_for END,
       note = COALESCE($5, note),
       provenance = COALESCE(provenance, $6),
       updated_at = now()
     WHERE id = $1`,
    [
      id,
      schedule,
      changes.cronExpression ?? null,
      changes.fireAt ?? null,
      changes.note ?? null,
      provenance ?? null,
    ],
  );
  return result.rowCount > 0;
}

export async function deleteCronEntry(db: Queryable, id: number): Promise<boolean> {
  return (await db.query("DELETE FROM cron_entries WHERE id = $1", [id])).rowCount > 0;
}
