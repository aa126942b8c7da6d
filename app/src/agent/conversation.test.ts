import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import { InboxStore, finishChange } from "../db/inbox.js";
import { messagesForInbox } from "../db/messages.js";
import { ConversationStore } from "./conversation.js";

let testDb: MigratedTestDatabase;
let db: Database;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("conversation");
  db = testDb.db;
}, 120_000);

afterAll(async () => {
  await testDb?.close();
});

const user = (text: string) => ({ role: "user" as const, content: text, timestamp: Date.now() });

describe("ConversationStore writes held for an entry being inserted", () => {
  it("waits for the entry's insert before writing, and writes nothing when it fails", async () => {
    const inbox = new InboxStore(db);
    await inbox.drawAhead();
    const conversation = new ConversationStore(db);
    await conversation.current();

    // The entry's row arrives after the write was asked for: the write waits for it.
    const first = inbox.reserve(null, null, { message: "one", attachments: [] });
    if (!first) throw new Error("no id was drawn");
    let inserted = () => {};
    const held = new Promise<void>((resolve) => (inserted = resolve));
    conversation.holdWritesUntil(first.saved.then(() => held));
    await conversation.save(user("one"), first.entry.id, { defer: true });
    let written = false;
    const flushing = conversation
      .flush(finishChange(first.entry.id, { status: "done", response: "answer", outcome: "reply" }))
      .then(() => (written = true));
    await first.saved;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(written).toBe(false);
    expect(await messagesForInbox(db, first.entry.id)).toEqual([]);
    inserted();
    await flushing;
    expect((await messagesForInbox(db, first.entry.id)).map((row) => row.message.role)).toEqual(["user"]);
    expect((await conversation.current()).messages.at(-1)?.inboxId).toBe(first.entry.id);

    // The next entry's insert fails: nothing is written, and the message stays deferred.
    const second = inbox.reserve(null, null, { message: "two", attachments: [] });
    if (!second) throw new Error("no id was drawn");
    const failed = second.saved.then(() => {
      throw new Error("the insert failed");
    });
    conversation.holdWritesUntil(failed);
    await conversation.save(user("two"), second.entry.id, { defer: true });
    await expect(conversation.flush()).rejects.toThrow("the insert failed");
    expect(await messagesForInbox(db, second.entry.id)).toEqual([]);

    // The next turn lifts the wait and starts afresh.
    conversation.holdWritesUntil(undefined);
    conversation.dropDeferred();
    await conversation.save(user("three"), null);
    expect((await conversation.current()).messages.at(-1)?.message).toMatchObject({ content: "three" });
  });
});
