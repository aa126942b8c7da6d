import { setTimeout } from "node:timers/promises";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { textTurn, toolTurn, type FakeTurn } from "@stavrobot/common/test-support";
import { ABORTED_REPLY, STEERING_REPLY } from "../src/queue/replies.js";
import { CANCELLATION_NOTE } from "../src/agent/turn.js";
import { chat, useTestApp, handOver } from "./helpers/app.js";

// maxRetries = 1, retryDelaySeconds = 0 (see configFor).
const t = useTestApp();

const serverError: FakeTurn = {
  content: [],
  error: {
    status: 500,
    body: { type: "error", error: { type: "api_error", message: "overloaded for a moment" } },
  },
};
const badRequest: FakeTurn = {
  content: [],
  error: {
    status: 400,
    body: { type: "error", error: { type: "invalid_request_error", message: "prompt is malformed" } },
  },
};

function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

async function inboxRow(id: number) {
  const rows = await t.app.db.query<{ status: string; attempts: number }>(
    "SELECT status, attempts FROM inbox WHERE id = $1",
    [id],
  );
  return rows.rows[0];
}

async function lastInboxId(): Promise<number> {
  const rows = await t.app.db.query<{ id: number }>("SELECT max(id) AS id FROM inbox");
  return rows.rows[0]!.id;
}

beforeEach(() => t.fake.reset());

describe("retries", () => {
  it("retries a turn after a transient provider failure", async () => {
    // The provider SDK itself tries 3 times; then the queue retries the turn once.
    t.fake.enqueue(serverError, serverError, serverError, textTurn("Worked the second time."));
    const reply = await chat(t.app, "try hard");
    expect(reply.body.response).toBe("Worked the second time.");
    expect(t.fake.requests).toHaveLength(4);
    expect(await inboxRow(await lastInboxId())).toEqual({ status: "done", attempts: 2 });
  });

  it("does not retry a 400 from the provider and says what went wrong", async () => {
    t.fake.enqueue(badRequest, textTurn("must not be used"));
    const reply = await chat(t.app, "bad one");
    expect(reply.body.response).toBe("Something went wrong: prompt is malformed (HTTP 400)");
    expect(t.fake.requests).toHaveLength(1);
    expect(await inboxRow(await lastInboxId())).toEqual({ status: "failed", attempts: 1 });
  });

  it("does not retry once a tool result was saved", async () => {
    t.fake.enqueue(
      toolTurn("execute_sql", {
        query: "CREATE TABLE side_effects (x int); INSERT INTO side_effects VALUES (1)",
      }),
    );
    t.fake.enqueue(serverError, serverError, serverError, textTurn("must not be used"));
    const reply = await chat(t.app, "do something once");
    expect(reply.body.response).toMatch(/^Something went wrong: .*overloaded for a moment/);
    expect(t.fake.requests).toHaveLength(4);
    const rows = await t.app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM side_effects");
    expect(rows.rows[0]!.n).toBe(1);
  });
});

describe("/stop and steering", () => {
  it("/stop aborts the running turn", async () => {
    const held = gate();
    t.fake.enqueue({ content: [{ type: "text", text: "too late" }], gate: held.promise });
    const pending = chat(t.app, "a long task");
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 10_000 });
    const stop = await chat(t.app, "/stop");
    expect(stop.body.response).toBe(ABORTED_REPLY);
    expect((await pending).body.response).toBe(ABORTED_REPLY);
    held.open();
    // Nothing to stop when idle, and /stop is not stored as a message: only the reference's
    // cancellation note is, once, so the next turn knows the request was dropped on purpose.
    expect((await chat(t.app, "/stop")).body.response).toBe("Nothing is running.");
    const stored = await t.app.db.query<{ text: string }>(
      "SELECT content::text AS text FROM messages WHERE content::text LIKE '%/stop%'",
    );
    expect(stored.rows).toHaveLength(1);
    expect(stored.rows[0]?.text).toContain(CANCELLATION_NOTE);
    t.fake.enqueue(textTurn("ok, what next?"));
    expect((await chat(t.app, "never mind")).body.response).toBe("ok, what next?");
    expect(JSON.stringify(t.fake.requests.at(-1)?.body.messages)).toContain(CANCELLATION_NOTE);
  });

  it("an owner's message mid-turn steers the running turn", async () => {
    const held = gate();
    t.fake.enqueue({ ...toolTurn("execute_sql", { query: "SELECT 1 AS one" }), gate: held.promise });
    t.fake.enqueue(textTurn("Done, and noted your extra request."));
    const first = chat(t.app, "first request");
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 10_000 });
    const steer = await chat(t.app, "also add oat milk");
    expect(steer.body.response).toBe(STEERING_REPLY);
    held.open();
    expect((await first).body.response).toBe("Done, and noted your extra request.");
    // The second LLM call carried the tool result and the steering message together.
    const second = JSON.stringify(t.fake.requests[1]!.body.messages);
    expect(second).toContain("tool_result");
    expect(second).toContain("Text: also add oat milk");
    await t.app.queue.idle();
    const steered = await t.app.db.query<{ status: string; saved: number }>(
      `SELECT i.status, (SELECT count(*)::int FROM messages m WHERE m.inbox_id = i.id) AS saved
       FROM inbox i WHERE i.payload->>'message' = 'also add oat milk'`,
    );
    expect(steered.rows).toEqual([{ status: "done", saved: 1 }]);
  });

  it("the owner's message typed while a plugin's result runs gets its own turn, not a steering reply", async () => {
    const held = gate();
    t.fake.enqueue({ ...textTurn("The forecast arrived: rain."), gate: held.promise });
    t.fake.enqueue(textTurn("Your meeting is at 3."));
    // A plugin's async result, as the plugin-runner delivers it: internal port, answer not awaited.
    const result = await handOver(t.app, {
      source: "plugin:weather/forecast",
      message: 'The run of tool "forecast" returned: rain',
    });
    expect(result.status).toBe(202);
    // The plugin-result turn is running.
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 10_000 });
    const owner = chat(t.app, "when is my meeting?");
    // The owner's message is kept while that turn runs.
    await vi.waitFor(
      async () => {
        const saved = await t.app.db.query(
          "SELECT 1 FROM inbox WHERE payload->>'message' = 'when is my meeting?'",
        );
        expect(saved.rows).toHaveLength(1);
      },
      { timeout: 10_000 },
    );
    held.open();
    const reply = (await owner).body.response as string;
    expect(reply).not.toBe(STEERING_REPLY);
    expect(reply).toMatch(/Your meeting is at 3\.$/);
    // With no push channel, the plugin-result turn's answer reaches the owner with that reply.
    expect(reply).toContain("The forecast arrived: rain.");
    expect(t.fake.requests[1]?.lastUserText).toContain("Text: when is my meeting?");
  });

  it("messages are processed one at a time, in order", async () => {
    const held = gate();
    t.fake.enqueue({ ...textTurn("one"), gate: held.promise }, textTurn("two"), textTurn("three"));
    // Messages from a channel (not the owner's CLI) queue instead of steering.
    const post = (message: string) =>
      fetch(`http://127.0.0.1:${t.app.port}/chat`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Authorization: `Basic ${Buffer.from("x:test-password-123").toString("base64")}`,
        },
        body: JSON.stringify({ message, source: "cron" }),
      }).then((r) => r.json() as Promise<{ response: string }>);
    const a = post("m1");
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 10_000 });
    const inboxSize = async () =>
      (await t.app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM inbox")).rows[0]!.n;
    const before = await inboxSize();
    const b = post("m2");
    // m2 saved before m3 is sent, so the order is known.
    await vi.waitFor(async () => expect(await inboxSize()).toBe(before + 1), { timeout: 10_000 });
    const c = post("m3");
    await vi.waitFor(async () => expect(await inboxSize()).toBe(before + 2), { timeout: 10_000 });
    // Both wait: no call to the model starts while m1's turn runs.
    await setTimeout(200);
    expect(t.fake.requests).toHaveLength(1);
    held.open();
    expect([(await a).response, (await b).response, (await c).response]).toEqual(["one", "two", "three"]);
    expect(t.fake.requests.map((r) => /Text: (m\d)/.exec(r.lastUserText)?.[1])).toEqual(["m1", "m2", "m3"]);
  });
});
