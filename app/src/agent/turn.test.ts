import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createAssistantMessageEventStream,
  getModels,
  type Api,
  type Context,
  type Model,
  type UserMessage,
} from "@mariozechner/pi-ai";
import { silentLogger } from "@stavrobot/common";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import { InboxStore, processingChange } from "../db/inbox.js";
import { messagesForInbox } from "../db/messages.js";
import { emptyAnswer } from "../model/anthropic/events.js";
import { ConversationStore } from "./conversation.js";
import { tokenBudget } from "./tokens.js";
import { CANCELLATION_NOTE, TurnEngine } from "./turn.js";

let testDb: MigratedTestDatabase;
let db: Database;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("turn");
  db = testDb.db;
}, 120_000);

afterAll(async () => {
  await testDb?.close();
});

const model = getModels("anthropic").find((m) => m.id === "claude-sonnet-4-5") as Model<Api>;
const user = (text: string): UserMessage => ({ role: "user", content: text, timestamp: Date.now() });
const texts = (context: Context) =>
  context.messages.map((message) =>
    typeof message.content === "string"
      ? message.content
      : message.content.map((block) => (block.type === "text" ? block.text : block.type)).join(""),
  );

/** An engine whose turn is prepared only once `prepared` opens, and whose model answers "ok". */
function engineHeldInPreparation() {
  let open = () => {};
  const prepared = new Promise<void>((resolve) => (open = resolve));
  const calls: string[][] = [];
  const conversation = new ConversationStore(db);
  const engine = new TurnEngine({
    db,
    conversation,
    lifecycle: { processing: processingChange },
    model,
    thinkingLevel: "off",
    maxTokens: undefined,
    maxToolRounds: 10,
    tools: () => [],
    stream: (streamModel, context) => {
      calls.push(texts(context));
      const stream = createAssistantMessageEventStream();
      const message = { ...emptyAnswer(streamModel), content: [{ type: "text" as const, text: "ok" }] };
      stream.push({ type: "done", reason: "stop", message });
      stream.end();
      return stream;
    },
    systemPrompt: async () => {
      await prepared;
      return "You are a test assistant.";
    },
    getApiKey: async () => "sk-test",
    budget: tokenBudget(100, 200_000),
    logger: silentLogger,
    missingKeyMessage: "no key",
  });
  return { engine, open, calls, conversation };
}

async function entry(message: string): Promise<number> {
  return (await new InboxStore(db).add(null, null, { message, attachments: [] })).entry.id;
}

describe("TurnEngine while a turn is being prepared", () => {
  it("takes in a steering message before the model's first call", async () => {
    const { engine, open, calls, conversation } = engineHeldInPreparation();
    const id = await entry("plan the week");
    const running = engine.run(id, user("plan the week"));
    expect(engine.busy).toBe(true);
    const steer = await entry("and keep Friday free");
    expect(engine.steer(steer, user("and keep Friday free"))).toBe(true);
    open();
    expect(await running).toEqual({ kind: "reply", text: "ok" });
    expect(engine.busy).toBe(false);
    expect(calls).toEqual([["plan the week", "and keep Friday free"]]);
    // Written with the turn's writes (here its end, which the queue writes with the entry's).
    await conversation.flush();
    expect((await messagesForInbox(db, steer)).map((row) => row.message.role)).toEqual(["user"]);
  });

  it("stops before the model's first call when /stop comes, and says so to the next turn", async () => {
    const { engine, open, calls } = engineHeldInPreparation();
    const id = await entry("think about it for a long time");
    const running = engine.run(id, user("think about it for a long time"));
    expect(engine.abort()).toBe(true);
    open();
    expect(await running).toEqual({ kind: "aborted" });
    expect(calls).toEqual([]);
    const saved = (await messagesForInbox(db, id)).map((row) => JSON.stringify(row.message.content));
    expect(saved.at(-1)).toContain(CANCELLATION_NOTE);
    // Nothing runs now: nothing to stop.
    expect(engine.abort()).toBe(false);
  });
});
