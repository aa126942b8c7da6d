import { describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { PASSWORD, chat, configFor, post, useTestApp, type LlmKind } from "./helpers/app.js";

const CAP = 3;
/** Far past the cap: a fake that got this far was never stopped, and says so instead of looping on. */
const GIVE_UP_AFTER = 25;

/** A model that answers every request with another db_search. */
function neverStops(fake: FakeLlmServer): void {
  fake.reset();
  let calls = 0;
  fake.setResponder(() =>
    ++calls > GIVE_UP_AFTER
      ? textTurn("the fake gave up: nothing stopped the tool calls")
      : toolTurn("db_search", { query: `trip ${calls}` }, "Let me look that up."),
  );
}

describe.each<LlmKind>(["anthropic", "openai"])("a turn that keeps calling tools (%s)", (kind) => {
  const t = useTestApp({
    kind,
    config: (fake) => configFor(fake, kind, "").replace("[queue]", `maxToolRounds = ${CAP}\n[queue]`),
  });

  it("stops at maxToolRounds, tells the person, and leaves a note for the next turn", async () => {
    neverStops(t.fake);
    const reply = await chat(t.app, "find everything about my trip");
    expect(reply.status).toBe(200);
    const text = String(reply.body.response);
    expect(text).toContain(`stopped after ${CAP} rounds of tool calls (db_search ×${CAP})`);
    expect(text).toMatch(/Ask me to continue/);
    // The model was called once per round, and not again once the cap was reached.
    expect(t.fake.requests).toHaveLength(CAP);

    const saved = await t.app.db.query<{ role: string; text: string }>(
      `SELECT role, content::text AS text FROM messages ORDER BY id`,
    );
    expect(saved.rows.map((row) => row.role)).toEqual([
      "user",
      ...Array.from({ length: CAP }, () => ["assistant", "toolResult"]).flat(),
      "user",
    ]);
    expect(saved.rows.at(-1)!.text).toContain(`[The previous request was stopped after ${CAP} rounds`);
    const inbox = await t.app.db.query<{ status: string; response: string }>(
      "SELECT status, response FROM inbox",
    );
    expect(inbox.rows).toEqual([{ status: "done", response: text }]);

    // Asked to go on, the model sees where it stopped.
    t.fake.reset();
    t.fake.enqueue(textTurn("Carrying on: nothing more about the trip."));
    const next = await chat(t.app, "continue");
    expect(next.body.response).toBe("Carrying on: nothing more about the trip.");
    const sent = JSON.stringify(t.fake.requests[0]!.body.messages);
    expect(sent).toContain(`[The previous request was stopped after ${CAP} rounds`);
    expect(sent).toContain("trip 3");
  });

  it("stops an automatic turn (a cron entry) the same way", async () => {
    neverStops(t.fake);
    const reply = await post(
      t.app.port,
      "/chat",
      { message: "[nightly-review] look through the day", source: "cron" },
      basicAuthHeader(PASSWORD),
    );
    expect(reply.status).toBe(200);
    expect(String(reply.body.response)).toContain(`stopped after ${CAP} rounds of tool calls`);
    expect(t.fake.requests).toHaveLength(CAP);
  });
});
