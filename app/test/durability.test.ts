import { basicAuthHeader } from "@stavrobot/common";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { INTERRUPTED_REPLY } from "../src/queue/replies.js";
import { PASSWORD, configFor, createTestEnv, post, type TestEnv } from "./helpers/app.js";
import { startAppProcess, type AppProcess } from "./helpers/process.js";

const never = new Promise<never>(() => {});

/** How many inbox rows the running app has written, read through the database explorer. */
async function inboxRows(port: number): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${port}/api/explorer/tables/inbox/rows`, {
    headers: { Authorization: basicAuthHeader(PASSWORD) },
  });
  return ((await response.json()) as { total: number }).total;
}

describe("a message survives kill -9 of the app", () => {
  let fake: FakeLlmServer;
  let testEnv: TestEnv;
  let running: AppProcess | undefined;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
  });
  afterEach(async () => {
    await running?.stop("SIGKILL");
    running = undefined;
    await testEnv?.cleanup();
  });
  afterAll(async () => {
    await fake?.close();
  });

  it("is processed after restart when the crash came before any tool ran", async () => {
    fake.reset();
    testEnv = await createTestEnv(configFor(fake));
    running = await startAppProcess(testEnv.env);
    fake.enqueue({ content: [{ type: "text", text: "never sent" }], gate: never });
    const lost = post(running.port, "/chat", { message: "remember the milk", source: "cli" }).catch(
      (e: Error) => e,
    );
    await vi.waitFor(() => expect(fake.requests).toHaveLength(1), { timeout: 30_000 });
    // A message's turn may start while its inbox row is being written ([queue] startWhileWriting):
    // it is accepted once the row is, so the kill waits for that.
    const port = running.port;
    await vi.waitFor(async () => expect(await inboxRows(port)).toBe(1), { timeout: 30_000 });
    await running.stop("SIGKILL");
    expect(await lost).toBeInstanceOf(Error);

    fake.enqueue(textTurn("Noted: milk."));
    running = await startAppProcess(testEnv.env);
    await vi.waitFor(() => expect(fake.requests).toHaveLength(2), { timeout: 30_000 });
    expect(fake.requests[1]!.lastUserText).toContain("Text: remember the milk");

    // The reply that nobody received is shown with the owner's next message.
    fake.enqueue(textTurn("Nothing else."));
    const next = await post(running.port, "/chat", { message: "anything else?", source: "cli" });
    expect(next.status).toBe(200);
    expect(next.body.response).toContain("Noted: milk.");
    expect(next.body.response).toContain("Nothing else.");
    // The history holds the user message once, not twice.
    const sent = JSON.stringify(fake.requests[2]!.body);
    expect(sent.split("Text: remember the milk").length - 1).toBe(1);
  });

  it("is not replayed once a tool had run; the sender is told instead", async () => {
    fake.reset();
    testEnv = await createTestEnv(configFor(fake));
    running = await startAppProcess(testEnv.env);
    fake.enqueue(
      toolTurn("execute_sql", {
        query: "CREATE TABLE payments (amount int); INSERT INTO payments VALUES (100)",
      }),
      { content: [{ type: "text", text: "never sent" }], gate: never },
    );
    const lost = post(running.port, "/chat", { message: "pay the rent", source: "cli" }).catch(
      (e: Error) => e,
    );
    // The second LLM call: the tool result was saved.
    await vi.waitFor(() => expect(fake.requests).toHaveLength(2), { timeout: 30_000 });
    await running.stop("SIGKILL");
    await lost;

    running = await startAppProcess(testEnv.env);
    fake.enqueue(
      textTurn("Hello again."),
      toolTurn("execute_sql", { query: "SELECT count(*) AS n FROM payments" }),
      textTurn("checked"),
    );
    const next = await post(running.port, "/chat", { message: "hi", source: "cli" });
    expect(next.body.response).toContain(INTERRUPTED_REPLY);
    expect(next.body.response).toContain("Hello again.");
    // Only the new message reached the model: the interrupted one was not run again.
    expect(fake.requests).toHaveLength(3);

    const check = await post(running.port, "/chat", { message: "how many payments?", source: "cli" });
    expect(check.body.response).toBe("checked");
    expect(fake.requests[4]!.lastUserText).toContain("rows[1]{n}:\n  1");
  });
});
