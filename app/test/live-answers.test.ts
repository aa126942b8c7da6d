import { describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, toolTurn, type FakeTurn } from "@stavrobot/common/test-support";
import {
  PASSWORD,
  chat,
  configFor,
  createTestEnv,
  post,
  startTestApp,
  useTestApp,
  type AppFixture,
  handOver,
} from "./helpers/app.js";
import { openEventStream, type EventStreamClient } from "./helpers/event-stream.js";

/**
 * Answers kept for an owner without Telegram or Signal reach their open consoles at once, through
 * `GET /api/events`: here a real SSE client on node:http, against the real app whose reminders are
 * made by the model with `manage_cron` and fired by the scheduler.
 */
const auth = { Authorization: basicAuthHeader(PASSWORD) };

function events(t: AppFixture, headers: Record<string, string> = {}, query = ""): Promise<EventStreamClient> {
  return openEventStream(`http://127.0.0.1:${t.app.port}/api/events${query}`, { ...auth, ...headers });
}

/** A gate per reminder: its turn's model answer waits until the test opens it. */
function gates(names: string[]): { open: (name: string) => void; turn: (text: string) => FakeTurn } {
  const openers = new Map<string, () => void>();
  const waits = new Map<string, Promise<void>>();
  for (const name of names) waits.set(name, new Promise((resolve) => openers.set(name, resolve)));
  return {
    open: (name) => openers.get(name)?.(),
    turn: (text) => {
      const name = names.find((candidate) => text.includes(`has fired] ${candidate}`));
      if (!name) return textTurn("(not a reminder)");
      return { ...textTurn(`Reminder: ${name}`), gate: waits.get(name) };
    },
  };
}

/** The owner asks for reminders; the model sets each with `manage_cron` to fire in a moment. */
async function scheduleReminders(t: AppFixture, notes: string[]): Promise<void> {
  const soon = new Date(Date.now() + 1_500).toISOString();
  t.fake.setResponder(undefined);
  t.fake.enqueue(
    ...notes.map((note) => toolTurn("manage_cron", { action: "create", note, fire_at: soon })),
    textTurn("Scheduled."),
  );
  const reply = await chat(t.app, `remind me: ${notes.join(", ")}`);
  expect(reply.body.response).toContain("Scheduled.");
}

async function doneCount(t: AppFixture): Promise<number> {
  const result = await t.app.db.query<{ count: number }>(
    "SELECT count(*)::int AS count FROM inbox WHERE source LIKE 'cron:%' AND status = 'done'",
  );
  return result.rows[0]?.count ?? 0;
}

const responses = (client: EventStreamClient) => client.of("answer").map((event) => event.data.response);

describe("GET /api/events: reminders reach an owner who has no Telegram or Signal", () => {
  const t = useTestApp();

  it("is the owner's alone", async () => {
    const stranger = await openEventStream(`http://127.0.0.1:${t.app.port}/api/events`);
    expect(stranger.status).toBe(401);
    const internal = await openEventStream(`http://127.0.0.1:${t.app.internalPort}/api/events`, auth);
    expect(internal.status).toBe(401);
  });

  it("streams a reminder as it fires, and a reconnect gets exactly what it missed", async () => {
    const opened = await events(t);
    expect(opened.status).toBe(200);
    expect(opened.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(opened.headers["cache-control"]).toBe("no-store");
    // Nothing kept yet: the catch-up is empty, and says so.
    expect(await opened.first("ready").then((event) => event.data)).toEqual({ missed: 0 });

    const reminders = gates(["one", "two", "three"]);
    await scheduleReminders(t, ["one", "two", "three"]);
    t.fake.setResponder((request) => reminders.turn(request.lastUserText));
    reminders.open("one");
    const [one] = await opened.until((received) => {
      const answers = received.filter((event) => event.type === "answer");
      if (answers.length === 0) throw new Error("no answer yet");
      return answers;
    });
    expect(one?.data).toMatchObject({
      source: expect.stringMatching(/^cron:\d+$/),
      response: "Reminder: one",
    });
    expect(one?.data.message).toMatch(/^\[Cron entry \d+ has fired\] one/);
    expect(one?.id).toMatch(/^[\w-]+\.\d+$/);
    // The stream's client went away; two more fire meanwhile.
    opened.close();
    await vi.waitFor(() => expect(t.app.live.size).toEqual({ listeners: 0, streams: 0 }));
    reminders.open("two");
    reminders.open("three");
    await vi.waitFor(async () => expect(await doneCount(t)).toBe(3), { timeout: 15_000 });
    await t.app.queue.idle();

    // Back with the last id it received: exactly the two it missed, in order, then live.
    const again = await events(t, { "Last-Event-ID": opened.lastId ?? "" });
    const ready = await again.first("ready").then((event) => event.data);
    expect(ready).toEqual({ missed: 2 });
    expect(responses(again)).toEqual(["Reminder: two", "Reminder: three"]);
    expect(again.of("answer").every((event) => event.id !== undefined)).toBe(true);
    // A client that cannot set the header says `?after=`.
    const byQuery = await events(t, {}, `?after=${encodeURIComponent(opened.lastId ?? "")}`);
    await byQuery.first("ready");
    expect(responses(byQuery)).toEqual(["Reminder: two", "Reminder: three"]);

    // A console opening afresh gets everything still unseen, oldest first.
    const fresh = await events(t);
    expect(await fresh.first("ready").then((event) => event.data)).toEqual({ missed: 3 });
    expect(responses(fresh)).toEqual(["Reminder: one", "Reminder: two", "Reminder: three"]);

    // Seen on another console: no longer missed by anyone.
    const two = again.of("answer")[0]?.data.id;
    expect((await post(t.app.port, "/api/answers/seen", { ids: [two] })).status).toBe(200);
    const later = await events(t, { "Last-Event-ID": opened.lastId ?? "" });
    await later.first("ready");
    expect(responses(later)).toEqual(["Reminder: three"]);

    // A cursor of another start (or a garbled one) is unknown: everything still unseen.
    for (const cursor of ["AAAAAAAA.2", "garbage", `${opened.lastId ?? ""}9999`]) {
      const unknown = await events(t, { "Last-Event-ID": cursor });
      await unknown.first("ready");
      expect(responses(unknown)).toEqual(["Reminder: one", "Reminder: three"]);
      unknown.close();
    }
    for (const client of [again, byQuery, fresh, later]) client.close();
    await vi.waitFor(() => expect(t.app.live.size).toEqual({ listeners: 0, streams: 0 }));
    await post(t.app.port, "/api/answers/seen", { ids: fresh.of("answer").map((event) => event.data.id) });
  });

  it("tells every open console once; a console's own message is still answered in its reply", async () => {
    // Both consoles are open before the reminder fires: each hears of it once.
    const a = await events(t);
    const b = await events(t);
    await Promise.all([a.first("ready"), b.first("ready")]);
    const reminders = gates(["four"]);
    await scheduleReminders(t, ["four"]);
    t.fake.setResponder((request) => reminders.turn(request.lastUserText));
    reminders.open("four");
    await a.until(() => expect(responses(a)).toEqual(["Reminder: four"]));
    await b.until(() => expect(responses(b)).toEqual(["Reminder: four"]));
    await t.app.queue.idle();
    // An owner's own console message is answered in its reply, not on the stream.
    t.fake.setResponder(undefined);
    t.fake.enqueue(textTurn("Hello, Ada."));
    const reply = await chat(t.app, "hello");
    expect(reply.body.response).toContain("Hello, Ada.");
    // …whose head showed the reminder nobody marked seen: now it is.
    expect(reply.body.response).toContain("Reminder: four");
    expect(responses(a)).toEqual(["Reminder: four"]);
    a.close();
    b.close();
  });

  it.each([
    [
      "a plugin's async result",
      "plugin:backup/run",
      'The run of tool "run" returned: 3 GB',
      "Backup done: 3 GB.",
    ],
    [
      "the coder's result",
      "coder",
      "The coding task for plugin notes finished.",
      "Your notes plugin is ready.",
    ],
  ])("streams %s too, as it is kept", async (_what, source, message, text) => {
    const stream = await events(t);
    await stream.first("ready");
    t.fake.setResponder(undefined);
    t.fake.enqueue(textTurn(text));
    const accepted = await handOver(t.app, { source, message });
    expect(accepted.status).toBe(202);
    const [answer] = await stream.until(() => {
      const answers = stream.of("answer");
      expect(answers).toHaveLength(1);
      return answers;
    });
    expect(answer?.data).toMatchObject({ source, message, response: text });
    stream.close();
    await post(t.app.port, "/api/answers/seen", { ids: [answer?.data.id] });
  });

  it("a reply does not repeat what an open console was sent while its message waited", async () => {
    const stream = await events(t);
    await stream.first("ready");
    const reminders = gates(["five"]);
    await scheduleReminders(t, ["five"]);
    t.fake.setResponder((request) =>
      request.lastUserText.includes("has fired]") ? reminders.turn(request.lastUserText) : textTurn("Here."),
    );
    // The reminder's turn is running when the owner writes: the message waits behind it.
    await vi.waitFor(
      () => expect(t.fake.requests.some((r) => r.lastUserText.includes("has fired] five"))).toBe(true),
      { timeout: 15_000 },
    );
    const waiting = chat(t.app, "still there?");
    await vi.waitFor(async () => {
      const found = await t.app.db.query(
        "SELECT 1 FROM inbox WHERE source = 'cli' AND payload->>'message' = 'still there?'",
      );
      expect(found.rows).toHaveLength(1);
    });
    reminders.open("five");
    expect((await waiting).body.response).toBe("Here.");
    expect(responses(stream)).toEqual(["Reminder: five"]);
    stream.close();
    // Nobody marked it seen (this client never does): the next reply still brings it.
    t.fake.setResponder(undefined);
    t.fake.enqueue(textTurn("Yes?"));
    const next = await chat(t.app, "anything for me?");
    expect(next.body.response).toContain("Reminder: five");
    expect(next.body.response).toContain("Yes?");
  });
});

describe("GET /api/events when the app stops", () => {
  it("ends open streams properly instead of holding the stop", async () => {
    const fake = await startFakeAnthropic();
    const env = await createTestEnv(configFor(fake));
    try {
      const app = await startTestApp(env);
      const client = await openEventStream(`http://127.0.0.1:${app.port}/api/events`, auth);
      await client.first("ready");
      await app.close();
      // Cut connections (what closing the server does after its grace period) would read "aborted".
      expect(await client.ended).toBe("end");
      expect(app.live.size).toEqual({ listeners: 0, streams: 0 });
    } finally {
      await fake.close();
      await env.cleanup();
    }
  });
});
