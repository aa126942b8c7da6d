import { beforeEach, describe, expect, it } from "vitest";
import { textTurn, toolTurn, type FakeTurn } from "@stavrobot/common/test-support";
import { ABORTED_REPLY, STEERING_REPLY } from "../src/queue.js";
import { chat, useTestApp } from "./helpers/app.js";
import { waitFor } from "./helpers/process.js";

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
    await waitFor(() => t.fake.requests.length === 1, 10_000, "the LLM call");
    const stop = await chat(t.app, "/stop");
    expect(stop.body.response).toBe(ABORTED_REPLY);
    expect((await pending).body.response).toBe(ABORTED_REPLY);
    held.open();
    // Nothing to stop when idle, and /stop is not stored as a message.
    expect((await chat(t.app, "/stop")).body.response).toBe("Nothing is running.");
    const stored = await t.app.db.query("SELECT 1 FROM messages WHERE content::text LIKE '%/stop%'");
    expect(stored.rows).toHaveLength(0);
  });

  it("an owner's message mid-turn steers the running turn", async () => {
    const held = gate();
    t.fake.enqueue({ ...toolTurn("execute_sql", { query: "SELECT 1 AS one" }), gate: held.promise });
    t.fake.enqueue(textTurn("Done, and noted your extra request."));
    const first = chat(t.app, "first request");
    await waitFor(() => t.fake.requests.length === 1, 10_000, "the LLM call");
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
    await waitFor(() => t.fake.requests.length === 1, 10_000, "first call");
    const inboxSize = async () =>
      (await t.app.db.query<{ n: number }>("SELECT count(*)::int AS n FROM inbox")).rows[0]!.n;
    const before = await inboxSize();
    const b = post("m2");
    await waitFor(async () => (await inboxSize()) === before + 1, 10_000, "m2 saved");
    const c = post("m3");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(t.fake.requests).toHaveLength(1);
    held.open();
    expect([(await a).response, (await b).response, (await c).response]).toEqual(["one", "two", "three"]);
    expect(t.fake.requests.map((r) => /Text: (m\d)/.exec(r.lastUserText)?.[1])).toEqual(["m1", "m2", "m3"]);
  });
});
