import { afterEach, describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn, type RecordedRequest, type Responder } from "@stavrobot/common/test-support";
import { HELP_TEXT, NEW_TEXT } from "../src/cli/commands.js";
import { PASSWORD, chat, useTestApp, type AppFixture } from "./helpers/app.js";
import { asProcess, inTerminal, terminalMissing, type Session } from "./helpers/cli.js";

/**
 * `npm run chat` as its own process against the real app, for an owner without Telegram or
 * Signal: a reminder set with `manage_cron` and fired by the scheduler is printed while the REPL
 * is open, without breaking a reply being waited for or a line being typed, and marked seen.
 */
const t = useTestApp();
/** Sessions a failed test left running are ended, so they hear nothing meant for the next test. */
const sessions: Session[] = [];
afterEach(() => {
  for (const session of sessions.splice(0)) session.kill();
  t.fake.setResponder(undefined);
});

const env = () => ({ STAVROBOT_URL: `http://127.0.0.1:${t.app.port}`, STAVROBOT_PASSWORD: PASSWORD });
const soon = () => new Date(Date.now() + 1_500).toISOString();
const WAIT = { timeout: 20_000, interval: 50 };
/** The prompt as readline draws it on a terminal, the cursor put after it. */
const PROMPT_DRAWN = "> \u001b[3G";

async function pending(app: AppFixture["app"]): Promise<unknown[]> {
  const response = await fetch(`http://127.0.0.1:${app.port}/api/answers/pending`, {
    headers: { Authorization: basicAuthHeader(PASSWORD) },
  });
  return ((await response.json()) as { answers: unknown[] }).answers;
}

/** What the owner sent in their turns (the text after the message's header lines). */
const ownerTexts = (requests: RecordedRequest[]) =>
  requests.map((request) => request.lastUserText).filter((text) => text.includes("Source: cli"));

/** Ctrl-D: the end of input, or the key in a terminal. */
async function end(session: Session, key?: string): Promise<void> {
  if (key === undefined) session.stdin.end();
  else session.stdin.write(key);
  expect(await session.exit).toBe(0);
}

describe("the REPL prints reminders as they fire", () => {
  it("shows a reminder set from the REPL itself, marks it seen, and no reply repeats it", async () => {
    t.fake.reset();
    const repl = track(asProcess([], env()));
    await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\n> $/), WAIT);
    t.fake.enqueue(
      toolTurn("manage_cron", { action: "create", note: "stretch your legs", fire_at: soon() }),
      textTurn("Scheduled."),
      textTurn("Time to stretch your legs!"),
    );
    repl.stdin.write("remind me to stretch in a moment\n");
    await vi.waitFor(() => expect(repl.stdout()).toContain("Scheduled.\n> "), WAIT);
    // Nothing typed: the reminder arrives on its own.
    await vi.waitFor(
      () =>
        expect(repl.stdout()).toMatch(
          /Scheduled\.\n> \nJust in:\n> stretch your legs \(cron\)\nTime to stretch your legs!\n\n> $/,
        ),
      WAIT,
    );
    await vi.waitFor(async () => expect(await pending(t.app)).toEqual([]), WAIT);
    t.fake.enqueue(textTurn("Hello again."));
    repl.stdin.write("hello\n");
    await vi.waitFor(() => expect(repl.stdout()).toContain("Hello again.\n"), WAIT);
    expect(repl.stdout().match(/Time to stretch your legs!/g)).toHaveLength(1);
    await end(repl);
    expect(repl.stderr()).toBe("");
  });

  it("prints a reminder that fires while a reply is awaited, and the reply, both whole", async () => {
    t.fake.reset();
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    // Set from another console; its turn takes a while when it fires.
    await setReminder(t, "water the plants", (request) =>
      isFiring("water the plants")(request)
        ? { ...textTurn("Water the plants now."), gate }
        : textTurn("Yes, I am here."),
    );
    await vi.waitFor(() => expect(t.fake.requests.some(isFiring("water the plants"))).toBe(true), WAIT);
    const repl = track(asProcess([], env()));
    await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\n> $/), WAIT);
    // The owner's message waits behind the reminder's turn; the reminder comes first.
    repl.stdin.write("are you there?\n");
    await waitingInInbox(t, "are you there?");
    release();
    // Both whole, each once. Usually the reminder comes first; on a loaded machine its event can
    // reach the REPL just after the reply (the kept answer is listed before it is published).
    await vi.waitFor(() => {
      expect(repl.stdout()).toContain("Yes, I am here.\n");
      expect(repl.stdout()).toContain("Water the plants now.");
    }, WAIT);
    const out = repl.stdout();
    expect(out).toMatch(/\nJust in:\n> water the plants \(cron\)\nWater the plants now\.\n\n/);
    expect(out).toMatch(/Yes, I am here\.\n/);
    expect(out.match(/Water the plants now\./g)).toHaveLength(1);
    expect(ownerTexts(t.fake.requests).at(-1)).toMatch(/\nText: are you there\?$/);
    // The reminder was shown here, and the reply was received: nothing is left for a later console.
    await vi.waitFor(async () => expect(await pending(t.app)).toEqual([]), WAIT);
    await end(repl);
    expect(repl.stderr()).toBe("");
  });

  it("shows what fired while it was closed when it opens", async () => {
    t.fake.reset();
    await setReminder(t, "call the bank", () => textTurn("Call the bank before noon."));
    // Only the firing: on a failure the diff shows whatever else was left unseen, and where from.
    await vi.waitFor(
      async () =>
        expect(await pending(t.app)).toEqual([
          expect.objectContaining({ title: "call the bank", response: "Call the bank before noon." }),
        ]),
      WAIT,
    );
    const repl = track(asProcess([], env()));
    await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\n> $/), WAIT);
    expect(repl.stdout()).toMatch(
      /^While you were away:\n\n> call the bank \(cron\)\nCall the bank before noon\.\n\nConnected to /,
    );
    await vi.waitFor(async () => expect(await pending(t.app)).toEqual([]), WAIT);
    await end(repl);
  });
});

describe.skipIf(terminalMissing)(
  `the REPL in a terminal${terminalMissing ? ` (skipped: ${terminalMissing})` : ""}`,
  () => {
    it("keeps the line being typed whole when a reminder is printed above it", async () => {
      t.fake.reset();
      const repl = track(inTerminal(env()));
      await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\r?\n(.|\n)*> /), WAIT);
      // Half a line typed, when the reminder fires.
      repl.stdin.write("half a li");
      await vi.waitFor(() => expect(repl.stdout()).toContain("half a li"), WAIT);
      await setReminder(t, "feed the cat", (request) =>
        isFiring("feed the cat")(request) ? textTurn("Feed the cat.") : textTurn("Got your line."),
      );
      await vi.waitFor(() => expect(repl.stdout()).toContain("Feed the cat."), WAIT);
      // Drawn again below the reminder, as it was, and still being typed.
      await vi.waitFor(() => {
        const out = repl.stdout();
        expect(out.slice(out.indexOf("Feed the cat."))).toContain("> half a li");
      }, WAIT);
      repl.stdin.write("ne\r");
      await vi.waitFor(() => expect(repl.stdout()).toContain("Got your line."), WAIT);
      expect(ownerTexts(t.fake.requests).at(-1)).toMatch(/\nText: half a line$/);
      await vi.waitFor(async () => expect(await pending(t.app)).toEqual([]), WAIT);
      await end(repl, "\x04");
      expect(repl.stdout()).not.toContain("Replies to earlier messages");
    });

    it("stops the turn a reply is pending for at Ctrl-C, goes on, and ends at Ctrl-C at the prompt", async () => {
      t.fake.reset();
      // A turn the model never finishes by itself: only the stop ends it.
      t.fake.enqueue({ ...textTurn("never shown"), gate: new Promise(() => {}) });
      const repl = track(inTerminal(env()));
      await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\r?\n(.|\n)*> /), WAIT);
      repl.stdin.write("think about it for a long time\r");
      await vi.waitFor(
        () => expect(ownerTexts(t.fake.requests).at(-1)).toMatch(/Text: think about it for a long time$/),
        WAIT,
      );
      repl.stdin.write("\x03");
      // The pending reply ends as /stop ends it, said once; nothing of the model's is shown.
      await vi.waitFor(() => expect(repl.stdout()).toContain("Aborted."), WAIT);
      await t.app.queue.idle();
      await vi.waitFor(() => expect(repl.stdout().endsWith(PROMPT_DRAWN)).toBe(true), WAIT);
      expect(repl.stdout().match(/Aborted\./g)).toHaveLength(1);
      expect(repl.stdout()).not.toContain("never shown");
      t.fake.enqueue(textTurn("Still here."));
      repl.stdin.write("still there?\r");
      await vi.waitFor(() => expect(repl.stdout()).toContain("Still here."), WAIT);
      await end(repl, "\x03");
    });

    it("stops a line typed to steer with the turn /stop ends, says so once, and never answers it later", async () => {
      t.fake.reset();
      t.fake.enqueue({ ...textTurn("never shown"), gate: new Promise(() => {}) });
      const repl = track(inTerminal(env()));
      await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\r?\n(.|\n)*> /), WAIT);
      repl.stdin.write("plan my week\r");
      await vi.waitFor(() => expect(ownerTexts(t.fake.requests).at(-1)).toMatch(/Text: plan my week$/), WAIT);
      repl.stdin.write("and keep Friday free\r");
      await vi.waitFor(
        () => expect(repl.stdout()).toContain("Message received, steering the current request."),
        WAIT,
      );
      repl.stdin.write("/stop\r");
      await vi.waitFor(
        () =>
          expect(repl.stdout()).toContain(
            "Aborted. The message you sent while it ran was stopped with it, unanswered.",
          ),
        WAIT,
      );
      await t.app.queue.idle();
      await vi.waitFor(() => expect(repl.stdout().endsWith(PROMPT_DRAWN)).toBe(true), WAIT);
      expect(repl.stdout().match(/Aborted\./g)).toHaveLength(1);
      // Never a turn of its own: the model was asked nothing more.
      expect(ownerTexts(t.fake.requests)).toHaveLength(1);
      t.fake.enqueue(textTurn("Still here."));
      repl.stdin.write("still there?\r");
      await vi.waitFor(() => expect(repl.stdout()).toContain("Still here."), WAIT);
      expect(ownerTexts(t.fake.requests).map((text) => text.split("Text: ")[1])).toEqual([
        "plan my week",
        "still there?",
      ]);
      expect(repl.stdout()).not.toContain("Replies to earlier messages");
      await end(repl, "\x04");
    });

    it("answers /help and /new itself, at the prompt and while a reply is pending", async () => {
      t.fake.reset();
      let release = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      t.fake.enqueue({ ...textTurn("Thought about it."), gate });
      const repl = track(inTerminal(env()));
      await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\r?\n(.|\n)*> /), WAIT);
      repl.stdin.write("/new\r");
      // A terminal ends lines with \r\n.
      const shown = (text: string) => text.replace(/\n/g, "\r\n");
      await vi.waitFor(() => expect(repl.stdout()).toContain(shown(NEW_TEXT)), WAIT);
      repl.stdin.write("think about it\r");
      await vi.waitFor(() => expect(ownerTexts(t.fake.requests)).toHaveLength(1), WAIT);
      repl.stdin.write("/help\r");
      await vi.waitFor(() => expect(repl.stdout()).toContain(shown(HELP_TEXT)), WAIT);
      release();
      await vi.waitFor(() => expect(repl.stdout()).toContain("Thought about it."), WAIT);
      // Neither was sent: no message, no steering.
      expect(repl.stdout()).not.toContain("steering the current request");
      const sent = await t.app.db.query<{ message: string }>(
        "SELECT payload->>'message' AS message FROM inbox WHERE source = 'cli' AND payload->>'message' LIKE '/%'",
      );
      expect(sent.rows).toEqual([]);
      await end(repl, "\x04");
    });

    it("-m on a terminal shows each tool there as it runs, then the answer", async () => {
      t.fake.reset();
      let release = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      t.fake.enqueue(toolTurn("execute_sql", { query: "SELECT 1 AS one" }), { ...textTurn("One."), gate });
      const session = track(inTerminal(env(), ["-m", "count to one"]));
      let ended = false;
      void session.exit.then(() => (ended = true));
      await vi.waitFor(() => expect(session.stdout()).toContain("· execute_sql\r\n"), WAIT);
      expect(ended).toBe(false);
      release();
      expect(await session.exit).toBe(0);
      expect(session.stdout()).toMatch(/· execute_sql\r\nOne\.\r\n$/);
    });
  },
);

function track(session: Session): Session {
  sessions.push(session);
  return session;
}

const isFiring = (note: string) => (request: RecordedRequest) =>
  request.lastUserText.includes(`has fired] ${note}`);

/**
 * Another console asks for a reminder: the model sets it with `manage_cron`, due in a moment;
 * every later model call is answered by `then`.
 */
async function setReminder(fixture: AppFixture, note: string, then: Responder): Promise<void> {
  const setup = [
    toolTurn("manage_cron", { action: "create", note, fire_at: soon() }),
    textTurn("Scheduled."),
  ];
  fixture.fake.setResponder((request) => setup.shift() ?? then(request));
  const reply = await chat(fixture.app, `remind me: ${note}`);
  expect(reply.body.response).toContain("Scheduled.");
}

async function waitingInInbox(fixture: AppFixture, message: string): Promise<void> {
  await vi.waitFor(async () => {
    const found = await fixture.app.db.query(
      "SELECT 1 FROM inbox WHERE source = 'cli' AND payload->>'message' = $1 AND status = 'pending'",
      [message],
    );
    expect(found.rows).toHaveLength(1);
  }, WAIT);
}
