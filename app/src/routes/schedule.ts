import { HttpError, badRequest, notFound, readValidJson, type Router } from "@stavrobot/common";
import { z } from "zod";
import type { Queryable } from "../db/database.js";
import {
  deleteCronEntry,
  getCronEntry,
  listCronEntries,
  updateCronEntry,
  type CronEntry,
} from "../db/cron.js";
import { cronError, parseDateTime } from "../scheduler/schedule.js";

export interface ScheduleRouteDeps {
  db: Queryable;
  /** The owner's time zone: cron expressions are read in it. */
  timezone: string;
  /** Re-armed after every change; says when each entry fires next. */
  scheduler: { reload(): Promise<void>; upcoming(): Map<number, Date> };
}

/** A firing's answer is shown up to this many characters (the whole one is in the explorer). */
const RESULT_CHARS = 2_000;
/** What the entries cost is summed over this many days (the Usage page's window). */
const COST_DAYS = 30;

/** An edit: a new schedule (one of the two) and/or a new note; nothing else. */
const editSchema = z
  .strictObject({
    cronExpression: z.string().trim().min(1, "must not be empty").max(200).optional(),
    fireAt: z.string().trim().min(1, "must not be empty").max(100).optional(),
    note: z.string().trim().min(1, "must not be empty").max(10_000).optional(),
  })
  .refine((edit) => !(edit.cronExpression && edit.fireAt), {
    message: "give either cronExpression (recurring) or fireAt (once), not both",
  })
  .refine((edit) => edit.cronExpression ?? edit.fireAt ?? edit.note, {
    message: "nothing to change: give cronExpression, fireAt or note",
  });

export interface ScheduleEntry {
  id: number;
  /** The entry's own name when its note starts with one (`[nightly-review] …`). */
  name: string | null;
  cronExpression: string | null;
  fireAt: string | null;
  note: string;
  /** When it fires next (ISO), or null when it will not (an expression that no longer parses). */
  nextFire: string | null;
  lastResult: {
    inboxId: number;
    at: string;
    status: string;
    outcome: string | null;
    text: string | null;
  } | null;
  cost: { turns: number; costUsd: number; lastCostUsd: number | null };
}

/**
 * The Schedule page's API (owner's password): `GET /api/schedule` → `{timezone, costDays, entries}`
 * (every cron entry with its next firing, its last firing's result and what its firings cost over
 * the last 30 days: usage rows whose source is `cron:<id>`); `PUT /api/schedule/<id>`
 * `{cronExpression | fireAt, note}` changes an entry (checked as `manage_cron` checks it; 400 with
 * the reason, 404 when there is no such entry) and `DELETE /api/schedule/<id>` removes one. Both
 * re-arm the scheduler and answer the entry list.
 */
export function addScheduleRoutes(router: Router, deps: ScheduleRouteDeps): void {
  const { db, timezone, scheduler } = deps;
  const answer = async () => ({
    json: { timezone, costDays: COST_DAYS, entries: await scheduleEntries(deps) },
  });
  router
    .get("/api/schedule", answer)
    .add("PUT", "/api/schedule/:id", async ({ req, params }) => {
      const id = entryId(params.id);
      const edit = await readValidJson(req, 64 * 1024, editSchema);
      if (!(await getCronEntry(db, id))) throw notFound(`Cron entry ${id} not found`);
      const changes: Parameters<typeof updateCronEntry>[2] = edit.note ? { note: edit.note } : {};
      if (edit.cronExpression) {
        const problem = cronError(edit.cronExpression, timezone);
        if (problem) throw badRequest(problem);
        Object.assign(changes, { cronExpression: edit.cronExpression, fireAt: null });
      } else if (edit.fireAt) {
        const at = parseDateTime(edit.fireAt, timezone);
        if (!at) throw badRequest(`"${edit.fireAt}" is not a date and time such as 2026-12-24T18:00`);
        Object.assign(changes, { cronExpression: null, fireAt: at });
      }
      if (!(await updateCronEntry(db, id, changes))) throw notFound(`Cron entry ${id} not found`);
      await scheduler.reload();
      return answer();
    })
    .add("DELETE", "/api/schedule/:id", async ({ params }) => {
      const id = entryId(params.id);
      if (!(await deleteCronEntry(db, id))) throw notFound(`Cron entry ${id} not found`);
      await scheduler.reload();
      return answer();
    });
}

function entryId(text: string | undefined): number {
  const id = /^\d{1,9}$/.test(text ?? "") ? Number(text) : NaN;
  if (!(id > 0)) throw new HttpError(400, "The entry id must be a positive whole number");
  return id;
}

interface LastRow {
  source: string;
  id: number;
  received_at: Date | string;
  status: string;
  outcome: string | null;
  response: string | null;
  error: string | null;
}

interface CostRow {
  source: string;
  turns: number | string;
  cost: number | string;
}

export async function scheduleEntries(deps: ScheduleRouteDeps): Promise<ScheduleEntry[]> {
  const { db, scheduler } = deps;
  const entries = await listCronEntries(db);
  if (entries.length === 0) return [];
  const sources = entries.map((entry) => `cron:${entry.id}`);
  const [last, costs, lastCosts] = await Promise.all([
    db.query<LastRow>(
      `SELECT DISTINCT ON (source) source, id, received_at, status, outcome, response, error
       FROM inbox WHERE source = ANY($1::text[]) ORDER BY source, id DESC`,
      [sources],
    ),
    db.query<CostRow>(
      `SELECT source, count(DISTINCT inbox_id) AS turns, coalesce(sum(cost_usd), 0) AS cost
       FROM usage WHERE source = ANY($1::text[]) AND at >= now() - interval '${COST_DAYS} days'
       GROUP BY source`,
      [sources],
    ),
    db.query<{ inbox_id: number; cost: number | string }>(
      `SELECT inbox_id, coalesce(sum(cost_usd), 0) AS cost FROM usage
       WHERE inbox_id IN (SELECT max(id) FROM inbox WHERE source = ANY($1::text[]) GROUP BY source)
       GROUP BY inbox_id`,
      [sources],
    ),
  ]);
  const lastBySource = new Map(last.rows.map((row) => [row.source, row]));
  const costBySource = new Map(costs.rows.map((row) => [row.source, row]));
  const costByInbox = new Map(lastCosts.rows.map((row) => [row.inbox_id, Number(row.cost)]));
  const upcoming = scheduler.upcoming();
  return entries.map((entry) => {
    const source = `cron:${entry.id}`;
    const lastRow = lastBySource.get(source);
    const cost = costBySource.get(source);
    return {
      id: entry.id,
      name: nameOf(entry),
      cronExpression: entry.cronExpression,
      fireAt: entry.fireAt?.toISOString() ?? null,
      note: entry.note,
      nextFire: upcoming.get(entry.id)?.toISOString() ?? null,
      lastResult: lastRow
        ? {
            inboxId: lastRow.id,
            at: new Date(lastRow.received_at).toISOString(),
            status: lastRow.status,
            outcome: lastRow.outcome,
            text: clip(lastRow.status === "failed" ? lastRow.error : lastRow.response),
          }
        : null,
      cost: {
        turns: Number(cost?.turns ?? 0),
        costUsd: Number(cost?.cost ?? 0),
        lastCostUsd: lastRow ? (costByInbox.get(lastRow.id) ?? 0) : null,
      },
    };
  });
}

function nameOf(entry: CronEntry): string | null {
  return /^\[([a-z0-9][a-z0-9-]{0,60})\]/i.exec(entry.note)?.[1] ?? null;
}

function clip(text: string | null): string | null {
  if (text === null) return null;
  return text.length > RESULT_CHARS ? `${text.slice(0, RESULT_CHARS)}…` : text;
}
