import { chmod, mkdir, readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { DomainError, codeRequestSchema, errorMessage, writeFileAtomic } from "@stavrobot/common";
import type { CodeRequest, Logger, Outbox } from "@stavrobot/common";
import type { TaskOutcome } from "./claude.js";

export type CodingTask = CodeRequest;

export interface TaskQueueDeps {
  /** Where each accepted task is recorded until its result is safely in the outbox. */
  dir: string;
  outbox: Pick<Outbox, "enqueue">;
  run(task: CodingTask): Promise<TaskOutcome>;
  /** Cleans up after a task a restart cut off mid-run (takes lent credentials back). */
  recover(task: CodingTask): Promise<void>;
  /** Tasks running at once, over all plugins. */
  maxConcurrent?: number;
  logger: Logger;
}

interface TaskRecord {
  task: CodingTask;
  /** Set when the agent was started: such a task is not run again after a restart. */
  started?: boolean;
}

/** The agent's answer is cut here; the app caps a message's text too. */
const RESULT_LIMIT_CHARS = 40_000;

/**
 * Coding tasks, one at a time per plugin (two agents editing one directory would trip over each
 * other) and at most `maxConcurrent` overall, in the order they arrived. Every accepted task is
 * written to disk first: after a restart, a task that had not started yet runs then, and one that
 * was cut off mid-run is reported as failed, so no task is silently lost. Results go to the app
 * through the durable outbox, keyed by the task id.
 */
export class TaskQueue {
  private readonly waiting: CodingTask[] = [];
  /** The task in flight for each plugin. */
  private readonly running = new Map<string, Promise<void>>();
  /** Ids of tasks waiting or running: a repeated submission is refused. */
  private readonly known = new Set<string>();
  private readonly maxConcurrent: number;
  private stopped = true;

  constructor(private readonly deps: TaskQueueDeps) {
    this.maxConcurrent = deps.maxConcurrent ?? 2;
  }

  /** Picks up what a previous run left: unstarted tasks are queued again, cut-off ones reported. */
  async start(): Promise<void> {
    const { dir, logger } = this.deps;
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    this.stopped = false;
    for (const name of (await readdir(dir)).sort()) {
      const path = join(dir, name);
      if (name.startsWith(".tmp-")) await rm(path, { force: true });
      if (!name.endsWith(".json") || name.startsWith(".")) continue;
      const record = await readRecord(path);
      if (!record) {
        logger.error("unreadable task record, removing it", { name });
        await rm(path, { force: true });
        continue;
      }
      if (!record.started) {
        this.known.add(record.task.taskId);
        this.waiting.push(record.task);
        continue;
      }
      logger.warn("a coding task was cut off by a restart", { taskId: record.task.taskId });
      await this.deps
        .recover(record.task)
        .catch((error: unknown) =>
          logger.error("could not clean up a cut-off task", { error: errorMessage(error) }),
        );
      await this.report(record.task, {
        ok: false,
        reason:
          "the coder restarted while the agent was working, so the task was stopped; the plugin may be " +
          "partly changed. Look at it and submit the task again if needed",
      });
    }
    this.pump();
  }

  /** Records the task, then queues it. Resolves once it is safely on disk. */
  async submit(task: CodingTask): Promise<void> {
    if (this.stopped) throw new DomainError("unavailable", "The coder is not accepting tasks right now");
    if (this.known.has(task.taskId)) {
      throw new DomainError("conflict", `Task ${task.taskId} was already submitted.`);
    }
    this.known.add(task.taskId);
    try {
      await this.save({ task });
    } catch (error) {
      this.known.delete(task.taskId);
      throw error;
    }
    this.waiting.push(task);
    this.pump();
  }

  /** Stops starting tasks. Running ones are not waited for: a restart reports them. */
  stop(): void {
    this.stopped = true;
  }

  /** Resolves once nothing is waiting or running (tests). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }

  get size(): { waiting: number; running: number } {
    return { waiting: this.waiting.length, running: this.running.size };
  }

  private pump(): void {
    while (!this.stopped && this.running.size < this.maxConcurrent) {
      const index = this.waiting.findIndex((task) => !this.running.has(task.plugin));
      if (index === -1) return;
      const task = this.waiting.splice(index, 1)[0] as CodingTask;
      const work = this.execute(task).finally(() => {
        this.running.delete(task.plugin);
        this.known.delete(task.taskId);
        this.pump();
      });
      this.running.set(task.plugin, work);
    }
  }

  private async execute(task: CodingTask): Promise<void> {
    const { logger } = this.deps;
    let outcome: TaskOutcome;
    try {
      await this.save({ task, started: true });
      logger.info("coding task started", { taskId: task.taskId, plugin: task.plugin });
      outcome = await this.deps.run(task);
    } catch (error) {
      logger.error("coding task crashed", { taskId: task.taskId, error: errorMessage(error) });
      outcome = { ok: false, reason: `the coder hit an internal error: ${errorMessage(error)}` };
    }
    logger.info("coding task finished", { taskId: task.taskId, plugin: task.plugin, ok: outcome.ok });
    await this.report(task, outcome);
  }

  /** Result into the outbox, then the record goes; a failure here leaves the record for a restart. */
  private async report(task: CodingTask, outcome: TaskOutcome): Promise<void> {
    try {
      await this.deps.outbox.enqueue(
        { message: resultMessage(task, outcome), source: "coder", sender: "coder-agent" },
        { id: task.taskId },
      );
      await rm(this.recordPath(task.taskId), { force: true });
    } catch (error) {
      this.deps.logger.error("could not queue a task's result", {
        taskId: task.taskId,
        error: errorMessage(error),
      });
    }
  }

  private save(record: TaskRecord): Promise<void> {
    return writeFileAtomic(this.recordPath(record.task.taskId), JSON.stringify(record));
  }

  private recordPath(taskId: string): string {
    return join(this.deps.dir, `${taskId}.json`);
  }
}

async function readRecord(path: string): Promise<TaskRecord | undefined> {
  try {
    const value = JSON.parse(await readFile(path, "utf8")) as { task?: unknown; started?: unknown };
    const task = codeRequestSchema.safeParse(value.task);
    return task.success ? { task: task.data, started: value.started === true } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The chat message the assistant receives: the agent's answer and how to look at the result, or
 * `Coding task failed: <reason>`.
 */
export function resultMessage(task: CodingTask, outcome: TaskOutcome): string {
  const head = `Coding task ${task.taskId} for plugin "${task.plugin}"`;
  if (!outcome.ok) return `${head} did not complete.\n\nCoding task failed: ${cap(outcome.reason)}`;
  const footer =
    `To see the plugin as it is now, use manage_plugins with action "show" and name "${task.plugin}"; ` +
    `run its tools with run_plugin_tool (plugin "${task.plugin}"). If it declares new config keys, ` +
    "set them with manage_plugins configure.";
  return `${head} is done. The coding agent reported:\n\n${cap(outcome.text.trim() || "(no summary)")}\n\n${footer}`;
}

function cap(text: string): string {
  if (text.length <= RESULT_LIMIT_CHARS) return text;
  return `${text.slice(0, RESULT_LIMIT_CHARS)}\n[…cut: the report was ${text.length} characters long]`;
}
