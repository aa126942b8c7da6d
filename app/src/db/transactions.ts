import type { Queryable } from "./types.js";

/**
 * Whether any transaction wrote since the one with id `xid` (as a row's `xmin` gives it), asked
 * of the database: the first transaction id not yet completed (`pg_current_snapshot()`'s xmax) is
 * still the one after `xid` only when no transaction that wrote anything (any table, DDL, through
 * a function or a trigger) has ended since. Transaction ids count across the whole server, so
 * another database's writes answer true too: the caller then checks what it holds, as it would
 * without this question. Compared in 32 bits, as `xmin` is.
 */
export async function wroteSince(db: Queryable, xid: number): Promise<boolean> {
  const result = await db.query<{ next: string }>(
    "SELECT (pg_snapshot_xmax(pg_current_snapshot())::text::bigint % 4294967296)::text AS next",
    [],
    { prepare: true },
  );
  const next = Number(result.rows[0]?.next);
  return next !== (xid + 1) % 4294967296;
}
