import { describe, expect, it, vi } from "vitest";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { silentLogger } from "@stavrobot/common";
import { newClient } from "./connect.js";
import { CallClock, OwnerQuestions, answerContent, fieldLine, formFields } from "./elicitation.js";

/** Every field kind the spec allows a form, as published servers send them (titles, old enumNames). */
const FORM = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name", minLength: 2 },
    email: { type: "string", format: "email" },
    homepage: { type: "string", format: "uri" },
    when: { type: "string", format: "date-time" },
    agree: { type: "boolean" },
    count: { type: "integer", minimum: 1, default: 3 },
    ratio: { type: "number", maximum: 1 },
    friend: { type: "string", enum: ["Monica", "Ross"] },
    hero: { type: "string", oneOf: [{ const: "h1", title: "Superman" }] },
    pet: { type: "string", enum: ["p1", "p2"], enumNames: ["Cats", "Dogs"] },
    fish: { type: "array", items: { type: "string", enum: ["tuna", "trout"] }, minItems: 1 },
  },
  required: ["name", "agree"],
};

describe("a server's form", () => {
  const fields = formFields(FORM);

  it("reads every kind of field the spec allows", () => {
    expect(fields.map((field) => `${field.name}:${field.kind}`)).toEqual([
      "name:text",
      "email:text",
      "homepage:text",
      "when:text",
      "agree:boolean",
      "count:number",
      "ratio:number",
      "friend:choice",
      "hero:choice",
      "pet:choice",
      "fish:choices",
    ]);
    expect(fieldLine(fields[0]!)).toBe("- name (text, length at least 2; required) – Name");
    expect(fieldLine(fields[9]!)).toBe("- pet (one of: p1 = Cats, p2 = Dogs)");
    expect(fieldLine(fields[10]!)).toBe("- fish (at least 1 of: tuna, trout, separated by commas)");
  });

  it("refuses what is not flat", () => {
    expect(() => formFields({ type: "object", properties: { deep: { type: "object" } } })).toThrow(
      'its field "deep" is not a text, number, yes/no or choice field',
    );
    expect(() => formFields({ type: "object" })).toThrow("the requested schema has no properties");
  });

  it("types an answer and fills in defaults", () => {
    expect(
      answerContent(fields, {
        name: "Ada",
        email: "ada@example.org",
        homepage: "https://example.org/ada",
        when: "2026-11-29T10:00Z",
        agree: "Yes",
        ratio: "0.5",
        friend: "monica",
        hero: "Superman",
        pet: "Dogs",
        fish: "trout,tuna,trout",
      }),
    ).toEqual({
      content: {
        name: "Ada",
        email: "ada@example.org",
        homepage: "https://example.org/ada",
        when: "2026-11-29T10:00Z",
        agree: true,
        count: 3,
        ratio: 0.5,
        friend: "Monica",
        hero: "h1",
        pet: "p2",
        fish: ["trout", "tuna"],
      },
    });
  });

  it("names every wrong value", () => {
    expect(
      answerContent(fields, {
        name: "A",
        email: "nobody",
        homepage: "example",
        when: "tomorrow",
        agree: "maybe",
        count: "2.5",
        ratio: "2",
        fish: "",
      }),
    ).toEqual({
      problems: [
        '"name" must be at least 2 characters',
        '"email" must be an email address',
        '"homepage" must be an address (a URI)',
        '"when" must be a date and time as YYYY-MM-DDTHH:MM (with a zone, e.g. Z or +02:00)',
        '"agree" must be yes or no',
        '"count" must be a whole number',
        '"ratio" must be at most 1',
        '"fish" needs at least 1 choice',
      ],
    });
  });
});

describe("the owner's questions", () => {
  const asked = {
    server: "probe",
    message: "Which?",
    fields: formFields(FORM),
    during: ["t"],
    limitMs: 60_000,
  };

  it("cancels a question the owner cannot be told", async () => {
    const questions = new OwnerQuestions({
      tell: () => Promise.reject(new Error("the app is down")),
      logger: silentLogger,
    });
    expect(await questions.ask(asked)).toEqual({ action: "cancel" });
  });

  it("cancels what the server withdraws, and what it still asks once nobody waits", async () => {
    const told: string[] = [];
    const questions = new OwnerQuestions({
      tell: async ({ id }) => void told.push(id),
      logger: silentLogger,
    });
    const withdrawn = new AbortController();
    const first = questions.ask({ ...asked, signal: withdrawn.signal });
    const second = questions.ask(asked);
    await vi.waitFor(() => expect(told).toHaveLength(2));
    withdrawn.abort();
    expect(await first).toEqual({ action: "cancel" });
    questions.withdraw("probe");
    expect(await second).toEqual({ action: "cancel" });
    expect(() => questions.answer(told[1]!, "cancel")).toThrow(`No question ${told[1]} waits`);
  });
});

describe("a call's clock", () => {
  it("stops counting while a question waits, for at most the call's time for questions", () => {
    vi.useFakeTimers();
    try {
      let timedOut = false;
      const clock = new CallClock(1_000, 5_000, () => (timedOut = true));
      vi.advanceTimersByTime(600);
      clock.pause();
      clock.pause();
      vi.advanceTimersByTime(3_000);
      expect(timedOut).toBe(false);
      expect(clock.questionTimeLeft()).toBe(2_000);
      clock.resume();
      clock.resume();
      vi.advanceTimersByTime(399);
      expect(timedOut).toBe(false);
      vi.advanceTimersByTime(1);
      expect(timedOut).toBe(true);
      clock.stop();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("the client's elicitation", () => {
  it("declares form elicitation only with somewhere to ask, and answers with what the owner said", async () => {
    const client = newClient(undefined, async (params) => ({
      action: "accept",
      content: { said: params.message },
    }));
    const server = new Server({ name: "probe", version: "1.0.0" }, { capabilities: {} });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await Promise.all([server.connect(serverSide), client.connect(clientSide)]);
    expect(server.getClientCapabilities()?.elicitation).toEqual({ form: {} });
    expect(
      await server.elicitInput({
        message: "hi",
        requestedSchema: { type: "object", properties: { said: { type: "string" } } },
      }),
    ).toEqual({ action: "accept", content: { said: "hi" } });
    // URL mode is not declared: the SDK refuses it on both sides.
    await expect(
      server.elicitInput({ mode: "url", message: "go", url: "https://example.org", elicitationId: "e1" }),
    ).rejects.toThrow();
    await client.close();

    const plain = newClient();
    const other = new Server({ name: "probe", version: "1.0.0" }, { capabilities: {} });
    const [a, b] = InMemoryTransport.createLinkedPair();
    await Promise.all([other.connect(b), plain.connect(a)]);
    expect(other.getClientCapabilities()?.elicitation).toBeUndefined();
    await plain.close();
  });
});
