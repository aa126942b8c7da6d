import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { ABORTED_REPLY } from "../src/queue/replies.js";
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
    config: (fake) =>
      configFor(fake, kind, "").replace("[queue]", `maxToolRounds = ${CAP}\n[queue]`) +
      // web_fetch, for a tool that runs until stopped (a page that never comes).
      `[webFetch]\napiKey = "k"\nmodel = "claude-haiku-4-5"\nbaseUrl = "${fake.url}"\nallowPrivateNetworks = true\n`,
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

  it("a /stop while the last allowed round's tool runs ends the turn as aborted", async () => {
    // Rounds 1 and 2 are quick; round 3 (the cap) fetches a page that never comes until /stop.
    let pageAsked!: () => void;
    const asked = new Promise<void>((resolve) => (pageAsked = resolve));
    const slow = createServer(() => pageAsked());
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/page`;
    t.fake.reset();
    let calls = 0;
    t.fake.setResponder(() =>
      ++calls < CAP
        ? toolTurn("db_search", { query: `trip ${calls}` })
        : toolTurn("web_fetch", { url, task: "read it" }),
    );
    try {
      const pending = chat(t.app, "a long task");
      await asked;
      expect((await chat(t.app, "/stop")).body.response).toBe(ABORTED_REPLY);
      expect((await pending).body.response).toBe(ABORTED_REPLY);
      expect(t.fake.requests).toHaveLength(CAP);
    } finally {
      slow.closeAllConnections();
      slow.close();
    }
  });
});
