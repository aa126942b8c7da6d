import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DomainError, silentLogger } from "@stavrobot/common";
import type { ChatRequest } from "@stavrobot/common";
import type { TaskOutcome } from "./claude.js";
import type { CodingTask } from "./tasks.js";
import { TaskQueue, resultMessage } from "./tasks.js";

/** A run that finishes only when the test says so. */
class Gate {
  readonly started: string[] = [];
  private readonly open = new Map<string, (outcome: TaskOutcome) => void>();

  run = (task: CodingTask): Promise<TaskOutcome> => {
    this.started.push(task.taskId);
    return new Promise((resolve) => this.open.set(task.taskId, resolve));
  };

  finish(taskId: string, outcome: TaskOutcome = { ok: true, text: `did ${taskId}` }): void {
    const resolve = this.open.get(taskId);
    if (!resolve) throw new Error(`${taskId} is not running`);
    this.open.delete(taskId);
    resolve(outcome);
  }
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function setup(
  run: (task: CodingTask) => Promise<TaskOutcome>,
  dir = mkdtempSync(join(tmpdir(), "coder-queue-")),
) {
  dirs.push(dir);
  const sent: { message: ChatRequest; id?: string }[] = [];
  const recovered: string[] = [];
  const queue = new TaskQueue({
    dir,
    outbox: {
      enqueue: async (message, options) => {
        sent.push({ message, ...(options?.id ? { id: options.id } : {}) });
        return `${options?.id}.json`;
      },
    },
    run,
    recover: async (task) => {
      recovered.push(task.taskId);
    },
    logger: silentLogger,
  });
  return { queue, sent, recovered, dir };
}

const task = (taskId: string, plugin: string): CodingTask => ({ taskId, plugin, message: `do ${taskId}` });

describe("TaskQueue", () => {
  it("runs one task per plugin at a time, two plugins at most, in arrival order", async () => {
    const gate = new Gate();
    const { queue, sent } = setup(gate.run);
    await queue.start();
    for (const [id, plugin] of [
      ["task-a1-000", "a"],
      ["task-a2-000", "a"],
      ["task-b1-000", "b"],
      ["task-c1-000", "c"],
    ] as const) {
      await queue.submit(task(id, plugin));
    }
    await vi.waitFor(() => expect(gate.started).toEqual(["task-a1-000", "task-b1-000"]));
    gate.finish("task-a1-000");
    // a2 was first in line, and its plugin is free again.
    await vi.waitFor(() => expect(gate.started).toEqual(["task-a1-000", "task-b1-000", "task-a2-000"]));
    gate.finish("task-b1-000");
    await vi.waitFor(() => expect(gate.started.at(-1)).toBe("task-c1-000"));
    gate.finish("task-a2-000");
    gate.finish("task-c1-000");
    await queue.idle();
    expect(sent.map((entry) => entry.id)).toEqual([
      "task-a1-000",
      "task-b1-000",
      "task-a2-000",
      "task-c1-000",
    ]);
    expect(sent[0]?.message).toMatchObject({ source: "coder", sender: "coder-agent" });
  });

  it("refuses a task id that is already queued, and a run that throws becomes a failure", async () => {
    const { queue, sent } = setup(async () => {
      throw new Error("kaboom");
    });
    await queue.start();
    await queue.submit(task("task-dup-000", "a"));
    await expect(queue.submit(task("task-dup-000", "a"))).rejects.toMatchObject({ kind: "conflict" });
    await queue.idle();
    expect(sent[0]?.message.message).toContain("Coding task failed: the coder hit an internal error: kaboom");
  });

  it("after a restart, runs tasks that had not started and reports those cut off", async () => {
    const dir = mkdtempSync(join(tmpdir(), "coder-queue-"));
    writeFileSync(
      join(dir, "task-cut-000.json"),
      JSON.stringify({ task: task("task-cut-000", "a"), started: true }),
    );
    writeFileSync(join(dir, "task-new-000.json"), JSON.stringify({ task: task("task-new-000", "b") }));
    writeFileSync(join(dir, "garbage.json"), "{nope");
    const gate = new Gate();
    const { queue, sent, recovered } = setup(gate.run, dir);
    await queue.start();
    expect(recovered).toEqual(["task-cut-000"]);
    expect(sent[0]?.id).toBe("task-cut-000");
    expect(sent[0]?.message.message).toContain(
      "Coding task failed: the coder restarted while the agent was working",
    );
    await vi.waitFor(() => expect(gate.started).toEqual(["task-new-000"]));
    gate.finish("task-new-000");
    await queue.idle();
    expect(sent[1]?.message.message).toContain('Coding task task-new-000 for plugin "b" is done.');
    expect(readdirSync(dir).filter((name) => name.endsWith(".json"))).toEqual([]);
  });

  it("accepts nothing once stopped", async () => {
    const { queue } = setup(new Gate().run);
    await queue.start();
    queue.stop();
    await expect(queue.submit(task("task-late-00", "a"))).rejects.toBeInstanceOf(DomainError);
  });
});

describe("resultMessage", () => {
  it("caps a huge report", () => {
    const text = resultMessage(task("task-big-000", "p"), { ok: true, text: "x".repeat(100_000) });
    expect(text.length).toBeLessThan(41_000);
    expect(text).toContain("[…cut: the report was 100000 characters long]");
  });
});
