import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { UserMessage } from "@mariozechner/pi-ai";
import { silentLogger } from "@stavrobot/common";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import { DatabaseUnavailableError, type Database } from "../db/database.js";
import { InboxStore, type InboxEntry } from "../db/inbox.js";
import { messagesForInbox, saveMessage } from "../db/messages.js";
import type { TurnOutcome, TurnStart } from "../agent/turn.js";
import { maySteer } from "../audience.js";
import { MessageQueue, type TurnEngineLike } from "./queue.js";
import type { HeldSteer } from "./contracts.js";
import { InboxLifecycle } from "./lifecycle.js";
import type { RowWrite } from "../db/row-write.js";
import {
  ABORTED_REPLY,
  CRASHED_REPLY,
  DUPLICATE_REPLY,
  STEERING_REPLY,
  STOPPED_STEER_REPLY,
} from "./replies.js";

const userMessage = (entry: InboxEntry): UserMessage => ({
  role: "user",
  content: [{ type: "text", text: `Text: ${entry.payload.message ?? ""}` }],
  timestamp: entry.receivedAt.getTime() + entry.id,
});

/** Plays the part of the agent: records which inbox entries ran, in order. */
class ScriptedEngine implements TurnEngineLike {
  busy = false;
  runs: number[] = [];
  /** Per run, whether the entry came saved as started (processing, attempt counted). */
  started: boolean[] = [];
  /** Per run, the steering messages it was given to take in first. */
  early: number[][] = [];
  outcomes: TurnOutcome[] = [];
  /** When false, steer() refuses, as when the turn has just ended. */
  steerAccepts = true;
  /** When true, steering messages are "taken in" (saved) by the running turn. */
  takeSteers = true;
  gate: Promise<void> | undefined;
  private steers: { id: number; message: UserMessage }[] = [];
  private aborted = false;

  constructor(private readonly db: Database) {}

  async run(
    inboxId: number,
    message: UserMessage,
    start: TurnStart = "count",
    write?: RowWrite,
    _agentId?: number,
    early: HeldSteer[] = [],
  ): Promise<TurnOutcome> {
    this.busy = true;
    this.aborted = false;
    this.runs.push(inboxId);
    this.started.push(start === "started");
    this.early.push(early.map((steer) => steer.inboxId));
    this.steers = early.map((steer) => ({ id: steer.inboxId, message: steer.message }));
    try {
      // As the real engine does: nothing is written before the entry's own insert.
      await write?.done;
      // As the real engine does, with the user message.
      if (start !== "started") await new InboxStore(this.db).markProcessing(inboxId, start === "count");
      const saved = await messagesForInbox(this.db, inboxId);
      if (!saved.length) await saveMessage(this.db, message, inboxId);
      await this.gate;
      // A failing model call takes nothing in.
      if (this.takeSteers && this.outcomes[0]?.kind !== "error")
        for (const steer of this.steers) await saveMessage(this.db, steer.message, steer.id);
      this.steers = [];
      if (this.aborted) return { kind: "aborted" };
      return this.outcomes.shift() ?? { kind: "reply", text: `reply to ${inboxId}` };
    } finally {
      this.busy = false;
    }
  }

  steer(inboxId: number, message: UserMessage): boolean {
    if (!this.busy || !this.steerAccepts) return false;
    this.steers.push({ id: inboxId, message });
    return true;
  }

  abort(): boolean {
    if (!this.busy) return false;
    this.aborted = true;
    return true;
  }
}

let testDb: MigratedTestDatabase;
let db: Database;
let inbox: InboxStore;
let engine: ScriptedEngine;

function makeQueue(
  overrides: {
    maxRetries?: number;
    retryDelayMs?: number;
    reloadConversation?: () => void;
    buildUserMessage?: (entry: InboxEntry) => Promise<UserMessage>;
    waitForDatabase?: () => Promise<void>;
  } = {},
): MessageQueue {
  return new MessageQueue({
    reloadConversation: overrides.reloadConversation,
    lifecycle: new InboxLifecycle({ inbox }),
    engine,
    answers: { deliver: async () => {} },
    buildUserMessage: overrides.buildUserMessage ?? (async (entry) => userMessage(entry)),
    messagesForInbox: (id) => messagesForInbox(db, id),
    afterTurn: async () => {},
    maySteer: (running, incoming) => maySteer(running, incoming, {}),
    waitForDatabase: overrides.waitForDatabase ?? (async () => {}),
    maxRetries: overrides.maxRetries ?? 2,
    retryDelayMs: overrides.retryDelayMs ?? 0,
    logger: silentLogger,
  });
}

function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("queue");
  db = testDb.db;
  inbox = new InboxStore(db);
}, 120_000);

beforeEach(async () => {
  await db.query("TRUNCATE inbox, messages RESTART IDENTITY CASCADE");
  // The sequence starts again: an id a store drew before would be drawn a second time.
  inbox = new InboxStore(db);
  engine = new ScriptedEngine(db);
});

afterAll(async () => {
  await testDb?.close();
});

const status = async (id: number) =>
  (await db.query<{ status: string; seen: boolean }>("SELECT status, seen FROM inbox WHERE id = $1", [id]))
    .rows[0];

describe("MessageQueue", () => {
  it("after a crash, runs a processing and a steered-but-not-taken-in message once each", async () => {
    const first = (await inbox.add(null, null, { message: "one", attachments: [] })).entry;
    await inbox.markProcessing(first.id);
    const second = (await inbox.add(null, null, { message: "two", attachments: [] })).entry;
    await inbox.markSteered(second.id);
    const queue = makeQueue();
    expect(await queue.recover()).toBe(2);
    await queue.idle();
    expect(engine.runs).toEqual([first.id, second.id]);
    expect((await status(second.id))?.status).toBe("done");
  });

  it("reads the conversation again at recovery only when a crash left something unfinished", async () => {
    const reloads = vi.fn();
    // A clean stop: the copy loaded at start (and the request encoding kept for it) stays.
    const done = (await inbox.add(null, null, { message: "done", attachments: [] })).entry;
    await inbox.finish(done.id, { status: "done", response: "ok", outcome: "reply" });
    expect(await makeQueue({ reloadConversation: reloads }).recover()).toBe(0);
    expect(reloads).not.toHaveBeenCalled();
    // A crash mid-turn: what it left is read from the database.
    const crashed = (await inbox.add(null, null, { message: "crashed", attachments: [] })).entry;
    await inbox.markProcessing(crashed.id);
    const queue = makeQueue({ reloadConversation: reloads });
    expect(await queue.recover()).toBe(1);
    expect(reloads).toHaveBeenCalledTimes(1);
    await queue.idle();
  });

  it("queues (once) an owner's message whose steering came too late", async () => {
    const queue = makeQueue();
    const held = gate();
    engine.gate = held.promise;
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    engine.steerAccepts = false; // the turn is ending
    const second = await queue.submit(null, null, { message: "two", attachments: [] });
    expect(second.steered).toBe(false);
    held.open();
    expect(await first.reply).toBe(`reply to ${first.id}`);
    expect(await second.reply).toBe(`reply to ${second.id}`);
    await queue.idle();
    expect(engine.runs).toEqual([first.id, second.id]);
  });

  it("a steer the turn took in is done and acknowledged; one it missed runs later and its reply is kept for the owner", async () => {
    const queue = makeQueue();
    const held = gate();
    engine.gate = held.promise;
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    await vi.waitFor(() => expect(engine.busy).toBe(true));
    const taken = await queue.submit(null, null, { message: "also this", attachments: [] });
    expect(taken).toMatchObject({ steered: true });
    expect(await taken.reply).toBe(STEERING_REPLY);
    held.open();
    await first.reply;
    await queue.idle();
    expect(engine.runs).toEqual([first.id]);
    expect(await status(taken.id)).toEqual({ status: "done", seen: true });

    engine.takeSteers = false;
    const second = gate();
    engine.gate = second.promise;
    const third = await queue.submit(null, null, { message: "three", attachments: [] });
    // The turn starts asynchronously: steer only once it runs.
    await vi.waitFor(() => expect(engine.busy).toBe(true));
    const missed = await queue.submit(null, null, { message: "missed steer", attachments: [] });
    expect(missed.steered).toBe(true);
    second.open();
    await third.reply;
    await queue.idle();
    expect(engine.runs).toEqual([first.id, third.id, missed.id]);
    // Its real reply was never seen: it is offered with the owner's next reply.
    const undelivered = await inbox.unseenAnswers({ owner: true }, missed.id + 1);
    expect(undelivered.map((row) => row.response)).toContain(`reply to ${missed.id}`);
  });

  it("a steer the turn had not taken in when /stop ended it is stopped with it, not run later", async () => {
    const queue = makeQueue();
    const held = gate();
    engine.gate = held.promise;
    engine.takeSteers = false;
    const first = await queue.submit(null, null, { message: "a long task", attachments: [] });
    await vi.waitFor(() => expect(engine.busy).toBe(true));
    const steer = await queue.submit(null, null, { message: "and also this", attachments: [] });
    expect(steer.steered).toBe(true);
    // The answer to /stop says the steering message went with the turn.
    expect(queue.stop()).toBe(
      `${ABORTED_REPLY} The message you sent while it ran was stopped with it, unanswered.`,
    );
    held.open();
    expect(await first.reply).toBe(ABORTED_REPLY);
    await queue.idle();
    expect(engine.runs).toEqual([first.id]);
    const row = await db.query<{ status: string; outcome: string; response: string; seen: boolean }>(
      "SELECT status, outcome, response, seen FROM inbox WHERE id = $1",
      [steer.id],
    );
    expect(row.rows[0]).toEqual({
      status: "done",
      outcome: "aborted",
      response: STOPPED_STEER_REPLY,
      seen: true,
    });
    // Nothing steered the next turn: its /stop says only "Aborted.".
    const again = gate();
    engine.gate = again.promise;
    const next = await queue.submit(null, null, { message: "next", attachments: [] });
    await vi.waitFor(() => expect(engine.runs).toHaveLength(2));
    expect(queue.stop()).toBe(ABORTED_REPLY);
    again.open();
    expect(await next.reply).toBe(ABORTED_REPLY);
    expect(engine.runs).toEqual([first.id, next.id]);
  });

  it("an owner's message sent while the queue waits to retry steers the next attempt", async () => {
    const queue = makeQueue({ retryDelayMs: 300 });
    engine.outcomes = [{ kind: "error", message: "503 overloaded", retryable: true, progressSaved: false }];
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    await vi.waitFor(() => expect(engine.runs).toHaveLength(1));
    await vi.waitFor(() => expect(engine.busy).toBe(false));
    const steer = await queue.submit(null, null, { message: "also this", attachments: [] });
    expect(steer).toMatchObject({ steered: true });
    expect(await steer.reply).toBe(STEERING_REPLY);
    expect(await first.reply).toBe(`reply to ${first.id}`);
    await queue.idle();
    // Taken in by the retry, not run as a turn of its own.
    expect(engine.runs).toEqual([first.id, first.id]);
    expect(engine.early).toEqual([[], [steer.id]]);
    expect(await status(steer.id)).toEqual({ status: "done", seen: true });
  });

  it("a steer an attempt that failed had not taken in is taken in by the retry", async () => {
    const queue = makeQueue();
    const held = gate();
    engine.gate = held.promise;
    engine.outcomes = [{ kind: "error", message: "503 overloaded", retryable: true, progressSaved: false }];
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    await vi.waitFor(() => expect(engine.busy).toBe(true));
    const steer = await queue.submit(null, null, { message: "also this", attachments: [] });
    expect(steer.steered).toBe(true);
    held.open();
    expect(await first.reply).toBe(`reply to ${first.id}`);
    await queue.idle();
    expect(engine.runs).toEqual([first.id, first.id]);
    expect(engine.early).toEqual([[], [steer.id]]);
    expect(await status(steer.id)).toEqual({ status: "done", seen: true });
  });

  it("/stop during a retry wait stops the message that steered it too", async () => {
    const queue = makeQueue({ retryDelayMs: 60_000 });
    engine.outcomes = [{ kind: "error", message: "503 overloaded", retryable: true, progressSaved: false }];
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    await vi.waitFor(() => expect(engine.runs).toHaveLength(1));
    await vi.waitFor(() => expect(engine.busy).toBe(false));
    const steer = await queue.submit(null, null, { message: "never mind, do this", attachments: [] });
    expect(steer.steered).toBe(true);
    expect(queue.stop()).toMatch(/^Aborted\. The message you sent while it ran was stopped with it/);
    expect(await first.reply).toBe(ABORTED_REPLY);
    await queue.idle();
    expect(engine.runs).toEqual([first.id]);
    expect(await status(steer.id)).toEqual({ status: "done", seen: true });
  });

  it("/stop cancels a retry the queue is waiting to make", async () => {
    const queue = makeQueue({ retryDelayMs: 60_000 });
    engine.outcomes = [{ kind: "error", message: "503 overloaded", retryable: true, progressSaved: false }];
    const submitted = await queue.submit("cron", null, { message: "retry me", attachments: [] });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(queue.stop()).toBe(ABORTED_REPLY);
    expect(await submitted.reply).toBe(ABORTED_REPLY);
    expect(engine.runs).toHaveLength(1);
  });

  it("saves a message the idle queue runs at once as started, and one that must wait as pending", async () => {
    const queue = makeQueue();
    const hold = gate();
    engine.gate = hold.promise;
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    await vi.waitFor(() => expect(engine.runs).toEqual([first.id]));
    const second = await queue.submit("cron", null, { message: "two", attachments: [] });
    const rows = await db.query<{ id: number; status: string; attempts: number }>(
      "SELECT id, status, attempts FROM inbox ORDER BY id",
    );
    // Its one attempt is counted before the turn starts: a message that crashes the process is
    // still given up on after maxRetries starts.
    expect(rows.rows).toEqual([
      { id: first.id, status: "processing", attempts: 1 },
      { id: second.id, status: "pending", attempts: 0 },
    ]);
    hold.open();
    expect(await first.reply).toBe(`reply to ${first.id}`);
    expect(await second.reply).toBe(`reply to ${second.id}`);
    expect(engine.started).toEqual([true, false]);
    const attempts = await db.query<{ attempts: number }>("SELECT attempts FROM inbox ORDER BY id");
    expect(attempts.rows).toEqual([{ attempts: 1 }, { attempts: 1 }]);
  });

  it("starts an idle queue's turn while its message is being saved, and writes nothing of it before", async () => {
    /** Holds the insert of a reserved entry until `release`. */
    class SlowInbox extends InboxStore {
      release = () => {};
      private readonly held = new Promise<void>((resolve) => (this.release = resolve));
      override reserve(...args: Parameters<InboxStore["reserve"]>) {
        const reserved = super.reserve(...args);
        return reserved && { entry: reserved.entry, saved: reserved.saved.then(() => this.held) };
      }
    }
    inbox = new SlowInbox(db);
    const queue = makeQueue();
    // The first message after a start is inserted as before (no id drawn yet)...
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    expect(await first.reply).toBe(`reply to ${first.id}`);
    await queue.idle();
    // ...and draws the next one's id: that one's turn starts before its insert is done.
    let accepted = false;
    const second = queue.submit(null, null, { message: "two", attachments: [] }).then((submitted) => {
      accepted = true;
      return submitted;
    });
    await vi.waitFor(() => expect(engine.runs).toHaveLength(2));
    const id = engine.runs[1] as number;
    expect(id).toBeGreaterThan(first.id);
    expect(accepted).toBe(false);
    expect(await messagesForInbox(db, id)).toEqual([]);
    (inbox as SlowInbox).release();
    const submitted = await second;
    expect(submitted.id).toBe(id);
    expect(await submitted.reply).toBe(`reply to ${id}`);
    expect(await status(id)).toEqual({ status: "done", seen: false });
    const row = await db.query<{ message: string; attempts: number }>(
      "SELECT payload->>'message' AS message, attempts FROM inbox WHERE id = $1",
      [id],
    );
    expect(row.rows).toEqual([{ message: "two", attempts: 1 }]);
    expect(engine.started).toEqual([true, true]);
  });

  it("abandons the turn of a message that could not be saved, and tells its sender", async () => {
    const queue = makeQueue();
    const first = await queue.submit(null, null, { message: "one", attachments: [] });
    await first.reply;
    await queue.idle();
    // The id drawn for the next message is taken behind the store's back (a sequence reset).
    const drawn = (await db.query<{ id: number }>("SELECT last_value::int AS id FROM inbox_id_seq")).rows[0]!
      .id;
    await db.query("INSERT INTO inbox (id, payload, status) VALUES ($1, '{}', 'done')", [drawn]);
    const held = gate();
    engine.gate = held.promise;
    await expect(queue.submit(null, null, { message: "two", attachments: [] })).rejects.toThrow(
      /duplicate key/,
    );
    held.open();
    await queue.idle();
    // Nothing of it was written, and the row that held its id was left alone.
    expect(await messagesForInbox(db, drawn)).toEqual([]);
    expect(await status(drawn)).toEqual({ status: "done", seen: false });
    // The next message is saved (with an id of its own) and answered.
    const third = await queue.submit(null, null, { message: "three", attachments: [] });
    expect(await third.reply).toBe(`reply to ${third.id}`);
    expect(third.id).not.toBe(drawn);
  });

  it("waits out an outage met while a turn is prepared, and tells the senders waiting that their messages are saved", async () => {
    const back = gate();
    let outages = 0;
    const queue = makeQueue({
      buildUserMessage: async (entry) => {
        if (entry.payload.message === "two" && outages++ === 0) {
          throw new DatabaseUnavailableError(new Error("not currently accepting connections"));
        }
        return userMessage(entry);
      },
      waitForDatabase: () => back.promise,
    });
    const held = gate();
    engine.gate = held.promise;
    const one = await queue.submit(null, null, { message: "one", attachments: [] });
    await vi.waitFor(() => expect(engine.runs).toHaveLength(1));
    const two = await queue.submit("cron", null, { message: "two", attachments: [] });
    const three = await queue.submit("cron", null, { message: "three", attachments: [] });
    engine.gate = undefined;
    held.open();
    expect(await one.reply).toBe(`reply to ${one.id}`);
    // Saved, and will run: both are told so now, neither is answered as failed.
    const told = Promise.all([two.deferred, three.deferred]).then(() => "told it will run");
    expect(await Promise.race([told, two.reply, three.reply])).toBe("told it will run");
    expect(engine.runs).toEqual([one.id]);
    back.open();
    expect(await two.reply).toBe(`reply to ${two.id}`);
    expect(await three.reply).toBe(`reply to ${three.id}`);
    expect(engine.runs).toEqual([one.id, two.id, three.id]);
  });

  it("gives up on a message that took the process down on every attempt", async () => {
    const entry = (await inbox.add(null, null, { message: "poison", attachments: [] })).entry;
    for (let i = 0; i < 3; i++) await inbox.markProcessing(entry.id); // three starts, three crashes
    const queue = makeQueue({ maxRetries: 2 });
    expect(await queue.recover()).toBe(0);
    expect(engine.runs).toEqual([]);
    const row = await db.query<{ status: string; response: string }>("SELECT status, response FROM inbox");
    expect(row.rows[0]).toEqual({ status: "failed", response: CRASHED_REPLY });
  });

  it("recognises a repeated delivery by its idempotency key and runs it once", async () => {
    const queue = makeQueue();
    const first = await queue.submit(
      "plugin:x/y",
      null,
      { message: "result", attachments: [] },
      "outbox-key-123",
    );
    expect(await first.reply).toBe(`reply to ${first.id}`);
    const again = await queue.submit(
      "plugin:x/y",
      null,
      { message: "result", attachments: [] },
      "outbox-key-123",
    );
    expect(again).toMatchObject({ id: first.id, duplicate: true });
    expect(await again.reply).toBe(DUPLICATE_REPLY);
    expect(engine.runs).toEqual([first.id]);
    expect((await db.query("SELECT 1 FROM inbox")).rows).toHaveLength(1);
  });
});
