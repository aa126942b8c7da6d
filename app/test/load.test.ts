import { describe, expect, it, vi } from "vitest";
import { textTurn } from "@stavrobot/common/test-support";
import { chat, useTestApp } from "./helpers/app.js";

const t = useTestApp();

const MESSAGES = 200;
/**
 * Rounds of the burst: which inserts finish first varies from run to run on a server, and each
 * round starts with the previous round's "received" flags waiting to ride its inserts.
 */
const ROUNDS = 4;

describe("200 owner messages at once", () => {
  it("accepts each with exactly one inbox row, newer than every row before it, and each reaches the model", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const before = await newestInboxId();
      const texts = Array.from({ length: MESSAGES }, (_, i) => `burst ${round}.${i}`);
      // The first turn answers once every other message is in (saved, or answered if it could not
      // be): all of them arrive while a turn runs, as with a model taking 200 ms, and most steer it.
      const settled = new Set<string>();
      const arrived = async () => {
        const saved = await t.app.db.query<{ message: string }>(
          "SELECT payload->>'message' AS message FROM inbox WHERE id > $1",
          [before],
        );
        return new Set([...settled, ...saved.rows.map((row) => row.message)]).size >= MESSAGES - 1;
      };
      let first = true;
      t.fake.reset();
      t.fake.setResponder(async () => {
        if (first) {
          first = false;
          await vi.waitFor(async () => expect(await arrived()).toBe(true), { timeout: 60_000, interval: 20 });
        }
        return textTurn("noted");
      });
      const answers = await Promise.all(
        texts.map((text) => chat(t.app, text).finally(() => settled.add(text))),
      );
      await t.app.queue.idle();

      const refused = answers.flatMap((answer, i) =>
        answer.status === 200 ? [] : [`${texts[i]}: ${answer.status} ${JSON.stringify(answer.body)}`],
      );
      expect(refused, `round ${round}`).toEqual([]);
      const rows = await t.app.db.query<{ id: number; message: string; status: string }>(
        "SELECT id, payload->>'message' AS message, status FROM inbox WHERE payload->>'message' LIKE $1",
        [`burst ${round}.%`],
      );
      const count = new Map<string, number>();
      for (const row of rows.rows) count.set(row.message, (count.get(row.message) ?? 0) + 1);
      expect(
        texts.filter((text) => count.get(text) !== 1),
        `round ${round}: messages without exactly one inbox row`,
      ).toEqual([]);
      // Ids keep the order messages were accepted in: every row of the burst is newer than every
      // row saved before it (counting rows newer than the last one found 199 of 200).
      expect(
        rows.rows.filter((row) => row.id <= before).map((row) => `${row.message} #${row.id}`),
        `round ${round}: rows older than the newest before the burst (#${before})`,
      ).toEqual([]);
      expect(rows.rows.filter((row) => row.status !== "done")).toEqual([]);
      const sent = t.fake.requests.map((request) => JSON.stringify(request.body.messages)).join("\n");
      expect(
        texts.filter((text) => !sent.includes(`Text: ${text}"`)),
        `round ${round}: messages that never reached the model`,
      ).toEqual([]);
    }
  }, 300_000);
});

async function newestInboxId(): Promise<number> {
  const result = await t.app.db.query<{ id: number }>("SELECT coalesce(max(id), 0) AS id FROM inbox");
  return result.rows[0]!.id;
}
