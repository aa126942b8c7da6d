import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../../test/helpers/db.js";
import {
  MAIL_PASSWORD,
  MAIL_USER,
  hasDovecot,
  mail,
  startDovecot,
  type Dovecot,
} from "../../../test/helpers/dovecot.js";
import { ImapReader } from "./imap.js";
import { parseMail } from "./parse.js";
import { EmailStore } from "./store.js";

/**
 * The mailbox reader against a real Dovecot on loopback: where it starts, IDLE waking it, a server
 * restart in the middle of IDLE, a new UIDVALIDITY, and a restart of the reader itself; each mail
 * handed over once.
 */
describe.skipIf(!hasDovecot)("reading a mailbox by IMAP", () => {
  let testDb: MigratedTestDatabase;
  let dovecot: Dovecot;
  let store: EmailStore;
  const handled: string[] = [];
  let readers: ImapReader[] = [];

  beforeAll(async () => {
    testDb = await openMigratedTestDatabase("email-imap");
    dovecot = await startDovecot();
    await dovecot.createMailbox("Assistant");
    store = new EmailStore(testDb.db, "secret-for-tests-0123456789");
  });
  afterAll(async () => {
    readers.forEach((reader) => reader.stop());
    await dovecot?.stop();
    await testDb?.close();
  });
  beforeEach(async () => {
    readers.forEach((reader) => reader.stop());
    readers = [];
    handled.length = 0;
    await testDb.db.query("TRUNCATE email_cursors, email_seen");
  });

  function reader(mailbox = "Assistant", moveTo?: string): ImapReader {
    const created = new ImapReader(
      {
        host: "127.0.0.1",
        port: dovecot.port,
        tls: false,
        user: MAIL_USER,
        password: MAIL_PASSWORD,
        mailbox,
        moveTo,
      },
      store,
      // As the channel does: a Message-ID seen before is not handled again.
      async (raw) => {
        const parsed = await parseMail(raw);
        const id = parsed.messageId ?? "";
        if (await store.seen(id)) return;
        handled.push(parsed.subject);
        await store.markSeen(id);
      },
      silentLogger,
    );
    readers.push(created);
    created.start();
    return created;
  }

  const message = (subject: string) =>
    mail(
      {
        From: "ada@example.org",
        Subject: subject,
        "Message-ID": `<${subject.replace(/\W/g, "")}@example.org>`,
      },
      "hello",
    );

  it("starts at the mailbox's end, then takes each new mail as IDLE tells of it, once", async () => {
    await dovecot.append(message("before the start"), "Assistant");
    const first = reader();
    await vi.waitFor(() => expect(first.state.connected).toBe(true), { timeout: 10_000 });
    await vi.waitFor(async () => expect(await store.cursor("Assistant")).toBeDefined(), { timeout: 10_000 });
    await dovecot.append(message("one"), "Assistant");
    await dovecot.append(message("two"), "Assistant");
    await vi.waitFor(() => expect(handled).toEqual(["one", "two"]), { timeout: 15_000 });
    expect((await store.cursor("Assistant"))?.lastUid).toBe(3);
  });

  it("goes on after the server restarts in the middle of IDLE, and after its own restart, losing nothing", async () => {
    const first = reader();
    await vi.waitFor(async () => expect(await store.cursor("Assistant")).toBeDefined(), { timeout: 10_000 });
    await vi.waitFor(() => expect(first.idling).toBe(true), { timeout: 10_000 });
    await dovecot.restart(300);
    await dovecot.append(message("after the server restart"), "Assistant");
    await vi.waitFor(() => expect(handled).toEqual(["after the server restart"]), { timeout: 20_000 });
    expect(first.state.connected).toBe(true);
    // The reader stops; mail arrives meanwhile; a new reader takes it from the cursor.
    first.stop();
    await dovecot.append(message("while the app was down"), "Assistant");
    reader();
    await vi.waitFor(() => expect(handled).toEqual(["after the server restart", "while the app was down"]), {
      timeout: 15_000,
    });
  });

  it("reads again what came since the cursor moved when UIDVALIDITY changes, handling nothing twice", async () => {
    await dovecot.createMailbox("Renumbered");
    const first = reader("Renumbered");
    await vi.waitFor(async () => expect(await store.cursor("Renumbered")).toBeDefined(), { timeout: 10_000 });
    await dovecot.append(message("first"), "Renumbered");
    await vi.waitFor(() => expect(handled).toEqual(["first"]), { timeout: 15_000 });
    const before = await store.cursor("Renumbered");
    first.stop();
    // The mailbox is made anew (a new UIDVALIDITY); the old mail comes back, and a new one.
    await dovecot.recreate("Renumbered");
    await dovecot.append(message("first"), "Renumbered");
    await dovecot.append(message("second"), "Renumbered");
    reader("Renumbered");
    await vi.waitFor(() => expect(handled).toEqual(["first", "second"]), { timeout: 15_000 });
    const after = await store.cursor("Renumbered");
    expect(after?.uidValidity).not.toBe(before?.uidValidity);
    expect(after?.lastUid).toBe(2);
  });

  it("says why while the server cannot be reached, and tries again", async () => {
    const broken = new ImapReader(
      {
        host: "127.0.0.1",
        port: dovecot.port,
        tls: false,
        user: MAIL_USER,
        password: "wrong",
        mailbox: "Assistant",
        moveTo: undefined,
      },
      store,
      async () => {},
      silentLogger,
    );
    readers.push(broken);
    broken.start();
    await vi.waitFor(() => expect(broken.state.lastError).toBeTruthy(), { timeout: 10_000 });
    expect(broken.state.connected).toBe(false);
    expect(broken.state.failingSince).toBeInstanceOf(Date);
  });

  it("moves each handled mail to the folder named, when one is", async () => {
    await dovecot.createMailbox("Moving");
    await dovecot.createMailbox("Handled");
    reader("Moving", "Handled");
    await vi.waitFor(async () => expect(await store.cursor("Moving")).toBeDefined(), { timeout: 10_000 });
    await dovecot.append(message("to be moved"), "Moving");
    await vi.waitFor(() => expect(handled).toEqual(["to be moved"]), { timeout: 15_000 });
    await vi.waitFor(async () => expect(await dovecot.count("Handled")).toBe(1), { timeout: 10_000 });
    expect(await dovecot.count("Moving")).toBe(0);
  });
});
