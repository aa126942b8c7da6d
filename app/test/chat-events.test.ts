import { describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { PASSWORD, chat, configFor, useTestApp } from "./helpers/app.js";
import { asProcess } from "./helpers/cli.js";

/**
 * `POST /chat` with `Accept: text/event-stream`: the turn's progress as it happens (its text, each
 * tool by name, each retry with its reason), then the very answer a plain request gets; and the
 * REPL showing it. Against the real app and the fake Anthropic API.
 */
const t = useTestApp({
  // One retry, at once: a failing provider is retried while the client follows.
  config: (fake) => configFor(fake).replace("maxRetries = 1", "maxRetries = 2"),
});

interface Event {
  type: string;
  data: Record<string, unknown>;
}

async function chatEvents(message: string): Promise<{ contentType: string | null; events: Event[] }> {
  const response = await fetch(`http://127.0.0.1:${t.app.port}/chat`, {
    method: "POST",
    headers: {
      Authorization: basicAuthHeader(PASSWORD),
      "Content-Type": "application/json",
      Accept: "text/event-stream",
    },
    body: JSON.stringify({ message, source: "cli" }),
  });
  const text = await response.text();
  const events = text
    .split("\n\n")
    .filter((block) => block.trim())
    .map((block) => ({
      type: /^event: (.*)$/m.exec(block)?.[1] ?? "",
      data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "null") as Record<string, unknown>,
    }));
  return { contentType: response.headers.get("content-type"), events };
}

const overloaded = {
  content: [],
  error: { status: 529, body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } },
};

describe("POST /chat as events", () => {
  it("streams the text as it is written and each tool by name, then the answer", async () => {
    t.fake.enqueue(toolTurn("execute_sql", { query: "SELECT 1 AS one" }), textTurn("One row, one column."));
    const { contentType, events } = await chatEvents("count something");
    expect(contentType).toMatch(/^text\/event-stream/);
    expect(events[0]).toEqual({ type: "accepted", data: { id: expect.any(Number) } });
    expect(events.filter((event) => event.type === "tool")).toEqual([
      { type: "tool", data: { name: "execute_sql" } },
    ]);
    const text = events.filter((event) => event.type === "text").map((event) => event.data.delta);
    expect(text.join("")).toBe("One row, one column.");
    expect(events.at(-1)).toEqual({ type: "answer", data: { response: "One row, one column." } });
    // Tools come before the text that follows them.
    expect(events.findIndex((event) => event.type === "tool")).toBeLessThan(
      events.findIndex((event) => event.type === "text"),
    );
  });

  it("says each retry at once, with its reason, and a failure last, marked failed", async () => {
    // The provider's client tries each request 3 times itself before the queue hears of a failure.
    t.fake.enqueue(...Array.from({ length: 9 }, () => overloaded));
    const { events } = await chatEvents("are you there?");
    const retries = events.filter((event) => event.type === "retry");
    expect(retries).toHaveLength(2);
    expect(retries[0]?.data).toMatchObject({ attempt: 1, of: 2, inSeconds: 0 });
    expect(String(retries[0]?.data.reason)).toContain("Overloaded");
    expect(events.at(-1)?.type).toBe("answer");
    expect(events.at(-1)?.data).toMatchObject({ failed: true });
    expect(String(events.at(-1)?.data.response)).toMatch(/^Something went wrong: .*Overloaded/);
  });

  it("answers plain JSON, exactly as before, to a client that does not ask for events", async () => {
    t.fake.enqueue(toolTurn("execute_sql", { query: "SELECT 1 AS one" }), textTurn("Plain."));
    const answer = await chat(t.app, "plain please");
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ response: "Plain." });
  });
});

describe("the REPL shows what the turn does", () => {
  it("prints each tool as it starts and each retry with its reason, then the reply", async () => {
    t.fake.enqueue(
      overloaded,
      overloaded,
      overloaded,
      toolTurn("execute_sql", { query: "SELECT 1 AS one" }),
      textTurn("Done after a retry."),
    );
    const repl = asProcess([], {
      STAVROBOT_URL: `http://127.0.0.1:${t.app.port}`,
      STAVROBOT_PASSWORD: PASSWORD,
    });
    await vi.waitFor(() => expect(repl.stdout()).toMatch(/Ctrl-D exits\.\n> $/), { timeout: 20_000 });
    repl.stdin.write("do the thing\n");
    await vi.waitFor(() => expect(repl.stdout()).toContain("Done after a retry.\n"), { timeout: 20_000 });
    expect(repl.stderr()).toMatch(/^· .*Overloaded.*\. Trying again now \(retry 1 of 2\)\.$/m);
    expect(repl.stdout()).toMatch(/· execute_sql\n(.|\n)*Done after a retry\.\n/);
    repl.stdin.end();
    expect(await repl.exit).toBe(0);
  });
});
