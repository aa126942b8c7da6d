import { randomUUID } from "node:crypto";
import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage, turnIdSchema, writeFileAtomic } from "@stavrobot/common";
import type { Logger, Outbox } from "@stavrobot/common";
import { fence } from "./chat-messages.js";

/** What runs in the background: an async tool or an async init script. */
export interface RunningRecord {
  plugin: string;
  /** The tool's name, or undefined for an init script. */
  tool?: string;
  /** The app's turn that started it: its result (or its loss) reports back there. */
  turn?: number;
  startedAt: string;
}

/**
 * Background runs in flight, one file each, written before the caller is told "running". A run
 * that ends puts its result in the outbox under the same id and then drops its record; a record
 * still here at start-up is a run the runner's death cut off, and becomes a result saying so.
 */
export class RunningRecords {
  constructor(
    private readonly dir: string,
    private readonly logger: Logger,
  ) {}

  async begin(record: Omit<RunningRecord, "startedAt">): Promise<string> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const id = `${Date.now().toString().padStart(15, "0")}-${randomUUID()}`;
    await writeFileAtomic(
      join(this.dir, `${id}.json`),
      JSON.stringify({ ...record, startedAt: new Date().toISOString() }),
    );
    return id;
  }

  async end(id: string): Promise<void> {
    await rm(join(this.dir, `${id}.json`), { force: true });
  }

  /**
   * At start-up, before anything new runs: every record left behind becomes a "restarted while
   * running" result (unless its result already reached the outbox). Returns the plugins concerned,
   * whose leftover processes the caller ends.
   */
  async recover(outbox: Outbox): Promise<string[]> {
    const names = (await readdir(this.dir).catch(() => [] as string[])).filter((name) =>
      name.endsWith(".json"),
    );
    const plugins = new Set<string>();
    for (const name of names.sort()) {
      const id = name.slice(0, -".json".length);
      try {
        const record = JSON.parse(await readFile(join(this.dir, name), "utf8")) as RunningRecord;
        plugins.add(record.plugin);
        if (!(await outbox.holds(name))) await outbox.enqueue(interruptedMessage(record), { id });
      } catch (error) {
        this.logger.error("could not settle an interrupted background run", {
          name,
          error: errorMessage(error),
        });
      }
      await rm(join(this.dir, name), { force: true });
    }
    return [...plugins];
  }
}

function interruptedMessage(record: RunningRecord) {
  const what = record.tool
    ? `tool "${record.tool}" (plugin "${record.plugin}")`
    : `the init script of plugin "${record.plugin}"`;
  const source = `plugin:${record.plugin}/${record.tool ?? "init"}`;
  const text =
    `The plugin-runner restarted while ${what} was running (started ${record.startedAt}), so its result ` +
    `was lost and the run was stopped. Run it again if it is still needed.`;
  const head = record.tool
    ? `The run of tool "${record.tool}" (plugin "${record.plugin}") failed:`
    : `Init script for plugin "${record.plugin}" failed:`;
  // A record from before turns were kept, or one not a number, reports to the main agent.
  const turn = turnIdSchema.safeParse(record.turn);
  return { source, message: `${head}\n${fence(text)}`, ...(turn.success ? { turn: turn.data } : {}) };
}
