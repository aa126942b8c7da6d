import type { AgentTool } from "@mariozechner/pi-agent-core";
import { StringEnum, Type } from "@mariozechner/pi-ai";
import { encode } from "@toon-format/toon";
import type { Queryable } from "../db/database.js";
import * as cron from "../db/cron.js";
import { formatLocalTime } from "../zoned-date.js";
import { cronError, parseDateTime } from "../scheduler/schedule.js";
import { ToolError, textResult, unknownAction } from "./result.js";

const actions = ["create", "update", "delete", "list", "help"] as const;

const parameters = Type.Object({
  action: StringEnum(actions),
  id: Type.Optional(Type.Integer({ description: "Entry id (update, delete)." })),
  schedule: Type.Optional(
    Type.String({ description: 'Cron expression for a recurring entry, e.g. "0 9 * * 1-5".' }),
  ),
  fire_at: Type.Optional(
    Type.String({ description: "ISO date-time for a one-shot entry, e.g. 2026-12-24T18:00." }),
  ),
  note: Type.Optional(Type.String({ description: "What to do when it fires." })),
});

const HELP = `manage_cron schedules messages to yourself. When an entry fires you receive a message with Source "cron:<id>" carrying its note, and you act on it (send the owner a reminder, update a memory...).
Actions:
- create {note, schedule | fire_at}: exactly one of schedule (a cron expression: minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5" for 9:00 on weekdays) or fire_at (an ISO date-time, e.g. "2026-12-24T18:00"; without an offset it is in the owner's time zone). A one-shot entry is deleted once it fires.
- update {id, schedule | fire_at, note}: change the schedule (setting one clears the other) and/or the note.
- delete {id}.
- list: every entry with its next firing time.
- help: this text.
Times are in the owner's time zone.`;

export interface ManageCronDeps {
  db: Queryable;
  timezone: string;
  /** Re-arms the scheduler after a change; returns when each entry fires next. */
  scheduler: { reload(): Promise<void>; upcoming(): Map<number, Date> };
  /** Where the running turn's outside text came from, if any: a reminder set then keeps it. */
  outside?: () => string | undefined;
}

/** The reference's cron tool, with validation that names what is wrong and the next firing time. */
export function createManageCronTool(deps: ManageCronDeps): AgentTool<typeof parameters> {
  const { db, timezone, scheduler } = deps;
  const when = (id: number): string => {
    const next = scheduler.upcoming().get(id);
    return next ? formatLocalTime(next, timezone) : "not scheduled";
  };
  return {
    name: "manage_cron",
    label: "Manage cron",
    description: "Scheduled reminders to yourself, recurring or one-shot. Use action 'help' for details.",
    parameters,
    async execute(_id, params) {
      switch (params.action) {
        case "help":
          return textResult(HELP);
        case "list": {
          const entries = await cron.listCronEntries(db);
          if (entries.length === 0) return textResult("No cron entries.");
          const rows = entries.map((entry) => ({
            id: entry.id,
            cronExpression: entry.cronExpression,
            fireAt: entry.fireAt ? formatLocalTime(entry.fireAt, timezone) : null,
            note: entry.note,
            next: when(entry.id),
          }));
          return textResult(encode({ entries: rows }));
        }
        case "create": {
          const note = params.note?.trim();
          if (!note) throw new ToolError("create needs a non-empty 'note'.");
          const schedule = readSchedule(params, timezone);
          if (!schedule)
            throw new ToolError(
              "create needs exactly one of 'schedule' (a cron expression) or 'fire_at' (an ISO date-time).",
            );
          const id = await cron.createCronEntry(db, { ...schedule, note, provenance: deps.outside?.() });
          await scheduler.reload();
          return textResult(
            `Cron entry ${id} created. Next firing: ${when(id)}.${pastNote(schedule.fireAt)}`,
          );
        }
        case "update": {
          if (params.id === undefined) throw new ToolError("update needs 'id'.");
          const schedule = readSchedule(params, timezone);
          const note = params.note?.trim();
          if (!schedule && !note) throw new ToolError("update needs 'schedule', 'fire_at' or 'note'.");
          if (
            !(await cron.updateCronEntry(
              db,
              params.id,
              { ...schedule, ...(note ? { note } : {}) },
              deps.outside?.(),
            ))
          ) {
            throw new ToolError(`Cron entry ${params.id} not found.`);
          }
          await scheduler.reload();
          return textResult(
            `Cron entry ${params.id} updated. Next firing: ${when(params.id)}.${pastNote(schedule?.fireAt ?? null)}`,
          );
        }
        case "delete": {
          if (params.id === undefined) throw new ToolError("delete needs 'id'.");
          if (!(await cron.deleteCronEntry(db, params.id)))
            throw new ToolError(`Cron entry ${params.id} not found.`);
          await scheduler.reload();
          return textResult(`Cron entry ${params.id} deleted.`);
        }
        default:
          throw unknownAction(String((params as { action: unknown }).action), actions);
      }
    },
  };
}

/** Exactly one of schedule / fire_at, validated; undefined when neither is given. */
function readSchedule(
  params: { schedule?: string | undefined; fire_at?: string | undefined },
  timezone: string,
): { cronExpression: string | null; fireAt: Date | null } | undefined {
  const schedule = params.schedule?.trim() || undefined;
  const fireAt = params.fire_at?.trim() || undefined;
  if (schedule && fireAt) throw new ToolError("Give either 'schedule' or 'fire_at', not both.");
  if (schedule) {
    const problem = cronError(schedule, timezone);
    if (problem) throw new ToolError(problem);
    return { cronExpression: schedule, fireAt: null };
  }
  if (fireAt) {
    const date = parseDateTime(fireAt, timezone);
    if (!date)
      throw new ToolError(`'fire_at' must be an ISO date-time such as 2026-12-24T18:00 (got "${fireAt}").`);
    return { cronExpression: null, fireAt: date };
  }
  return undefined;
}

function pastNote(fireAt: Date | null): string {
  return fireAt && fireAt.getTime() < Date.now() ? " That time has passed, so it fires now." : "";
}
