import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import { InboxStore } from "../db/inbox.js";
import { finishChange } from "../db/inbox-changes.js";
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

describe("ConversationStore after SQL the model ran", () => {
  it("keeps its copy when nothing else wrote the tables, and reads them again when anything did", async () => {
    await db.query("TRUNCATE messages, compactions RESTART IDENTITY CASCADE");
    const conversation = new ConversationStore(db);
    await conversation.current();
    await conversation.save(user("one"), null);
    await conversation.save(user("two"), null);
    const kept = await conversation.current();

    // Read-only SQL: the same copy (and so the same objects, whose request encoding is kept).
    await db.query("SELECT count(*) FROM messages");
    conversation.recheck();
    expect(await conversation.current()).toBe(kept);

    // A statement that names no table the copy comes from, but writes one (through a function).
    await db.query(
      "CREATE OR REPLACE FUNCTION forget_first() RETURNS void LANGUAGE sql AS 'DELETE FROM messages WHERE id = 1'",
    );
    await db.query("SELECT forget_first()");
    conversation.recheck();
    const afterDelete = await conversation.current();
    expect(afterDelete).not.toBe(kept);
    expect(afterDelete.messages.map((row) => row.message)).toMatchObject([{ content: "two" }]);

    // A row rewritten in place.
    await db.query(`UPDATE messages SET content = jsonb_set(content, '{content}', '"changed"')`);
    conversation.recheck();
    expect((await conversation.current()).messages.map((row) => row.message)).toMatchObject([
      { content: "changed" },
    ]);

    // A compaction written, then its summary rewritten.
    await conversation.compact("the summary", 2);
    const compacted = await conversation.current();
    conversation.recheck();
    expect(await conversation.current()).toBe(compacted);
    await db.query("UPDATE compactions SET summary = 'rewritten'");
    conversation.recheck();
    expect((await conversation.current()).summary?.text).toBe("rewritten");
    await db.query("DROP FUNCTION forget_first()");
  });
});
