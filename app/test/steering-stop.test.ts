import { beforeEach, describe, expect, it, vi } from "vitest";
import { textTurn, type FakeTurn } from "@stavrobot/common/test-support";
import { ABORTED_REPLY, STEERING_REPLY, STOPPED_STEER_REPLY } from "../src/queue/replies.js";
import { chat, configFor, useTestApp } from "./helpers/app.js";

/**
 * The owner's messages that steer a turn, with the real engine: stopped with the turn `/stop`
 * ends (never answered later as a turn of their own), and taken in by a retry when they come
 * while the queue waits to make it. One retry, a second apart.
 */
const t = useTestApp({
  config: (fake) => configFor(fake).replace("retryDelaySeconds = 0", "retryDelaySeconds = 1"),
});
const WAIT = { timeout: 15_000 };

const serverError: FakeTurn = {
  content: [],
  error: {
    status: 500,
    body: { type: "error", error: { type: "api_error", message: "overloaded for a moment" } },
  },
};

function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

async function inboxRow(message: string) {
  const rows = await t.app.db.query<{ status: string; outcome: string; response: string; seen: boolean }>(
    "SELECT status, outcome, response, seen FROM inbox WHERE payload->>'message' = $1",
    [message],
  );
  return rows.rows;
}

const sent = (index: number) => JSON.stringify(t.fake.requests[index]?.body.messages ?? null);

beforeEach(() => t.fake.reset());

describe("steering and /stop", () => {
  it("a message that steered a turn /stop ended is stopped with it, not answered later", async () => {
    const held = gate();
    t.fake.enqueue({ ...textTurn("never shown"), gate: held.promise });
    const pending = chat(t.app, "think about it for a long time");
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), WAIT);
    expect((await chat(t.app, "and mind the budget")).body.response).toBe(STEERING_REPLY);
    // The answer to /stop says what went with the turn.
    expect((await chat(t.app, "/stop")).body.response).toBe(
      `${ABORTED_REPLY} The message you sent while it ran was stopped with it, unanswered.`,
    );
    expect((await pending).body.response).toBe(ABORTED_REPLY);
    held.open();
    await t.app.queue.idle();
    // No turn of its own: the model was not asked again.
    expect(t.fake.requests).toHaveLength(1);
    expect(await inboxRow("and mind the budget")).toEqual([
      { status: "done", outcome: "aborted", response: STOPPED_STEER_REPLY, seen: true },
    ]);
    t.fake.enqueue(textTurn("What next?"));
    expect((await chat(t.app, "hello")).body.response).toBe("What next?");
    expect(sent(1)).not.toContain("mind the budget");
  });

  it("a message sent while the queue waits to retry the turn is taken in by the retry", async () => {
    // The provider's library tries three times; then the queue waits a second and tries again.
    t.fake.enqueue(serverError, serverError, serverError, textTurn("Done, Friday is free."));
    const pending = chat(t.app, "plan the week");
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(3), WAIT);
    expect((await chat(t.app, "and keep Friday free")).body.response).toBe(STEERING_REPLY);
    expect((await pending).body.response).toBe("Done, Friday is free.");
    await t.app.queue.idle();
    // The retry carried both messages, in order; nothing else was asked.
    expect(t.fake.requests).toHaveLength(4);
    expect(sent(3)).toMatch(/Text: plan the week(.|\n)*Text: and keep Friday free/);
    expect(await inboxRow("and keep Friday free")).toEqual([
      { status: "done", outcome: "steered", response: STEERING_REPLY, seen: true },
    ]);
  });
});
