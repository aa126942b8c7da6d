import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { startFakeEmbeddings, type FakeEmbeddings } from "@stavrobot/common/test-support";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import { fakeEmbeddingsClient, insertTurn } from "../../test/helpers/embeddings.js";
import { createDbSearchTool } from "../tools/db-search.js";
import type { EmbeddingsClient } from "./client.js";
import { fusedSearch, VectorCache, type FusedResult } from "./search.js";
import { liveIdentity } from "./state.js";
import { EmbeddingsWorker } from "./worker.js";

let testDb: MigratedTestDatabase;
let fake: FakeEmbeddings;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("embeddings");
  fake = await startFakeEmbeddings({ apiKey: "sk-test" });
});
afterAll(async () => {
  await fake.close();
  await testDb.close();
});
beforeEach(async () => {
  await testDb.db.query(
    "TRUNCATE embedding_chunks, messages, memories, scratchpad, compactions, inbox, pages RESTART IDENTITY CASCADE",
  );
  await testDb.db.query("DELETE FROM agents WHERE id <> 1");
  await testDb.db.query("DELETE FROM app_state WHERE key LIKE 'embeddings.%'");
  fake.calls.length = 0;
});
afterEach(() => fake.setDelay(0));

function client(model = "fake-embed-a"): EmbeddingsClient {
  return fakeEmbeddingsClient(fake.url, model);
}

function worker(
  embeddings: EmbeddingsClient,
  options: { batchSize?: number; batchesPerCycle?: number; turnsPerPass?: number } = {},
) {
  return new EmbeddingsWorker({ db: testDb.db, client: embeddings, logger: silentLogger, ...options });
}

/** A finished turn (an hour old): the owner's words and the answer. */
function turn(user: string, answer: string, agentId = 1): Promise<number> {
  return insertTurn(testDb.db, user, answer, agentId);
}

async function statuses(identity?: string): Promise<Record<string, number>> {
  const rows = await testDb.db.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM embedding_chunks ${identity ? "WHERE identity = $1" : ""} GROUP BY status`,
    identity ? [identity] : [],
  );
  return Object.fromEntries(rows.rows.map((row) => [row.status, row.n]));
}

async function search(embeddings: EmbeddingsClient, query: string, agentId = 1): Promise<FusedResult> {
  const result = await fusedSearch(
    { db: testDb.db, client: embeddings, cache: new VectorCache() },
    query,
    agentId,
    10,
  );
  if (!result) throw new Error("the index has had no pass yet");
  return result;
}

describe("the embedding index", () => {
  it("indexes each turn (the words and the answer, with a header) in batches", async () => {
    for (let i = 0; i < 150; i++) await turn(`note number ${i} about the garden`, `Noted ${i}.`);
    const embeddings = client();
    await worker(embeddings).cycle();
    expect(fake.calls.map((call) => call.inputs.length)).toEqual([64, 64, 22]);
    expect(fake.calls[0]?.headers.authorization).toBe("Bearer sk-test");
    expect(fake.calls[0]?.body).toMatchObject({ model: "fake-embed-a", encoding_format: "float" });
    expect(await statuses()).toEqual({ ok: 150 });
    const first = fake.inputs()[0] ?? "";
    expect(first).toMatch(
      /^\[\d{4}-\d\d-\d\d \d\d:\d\d UTC · console · owner\]\nUser: note number 0 about the garden\nAssistant: Noted 0\.$/,
    );
    // A second pass finds nothing new to send.
    await worker(embeddings).cycle();
    expect(fake.calls).toHaveLength(3);
  });

  it("indexes a turn once it is finished, past one still running, in passes over the history", async () => {
    for (let i = 0; i < 5; i++) await turn(`early note ${i}`, "ok");
    // The owner's turn still running: its inbox entry processing, no answer yet, just now.
    const inbox = await testDb.db.query<{ id: number }>(
      "INSERT INTO inbox (source, payload, status) VALUES ('telegram', '{}', 'processing') RETURNING id",
    );
    const open = await testDb.db.query<{ id: number }>(
      "INSERT INTO messages (role, content, search_text, inbox_id) VALUES ('user', '{}', 'what is the weather', $1) RETURNING id",
      [inbox.rows[0]!.id],
    );
    // Later turns of another conversation (a subagent's) are indexed past it.
    const agent = await testDb.db.query<{ id: number }>(
      "INSERT INTO agents (name) VALUES ('helper') RETURNING id",
    );
    for (let i = 0; i < 5; i++) await turn(`late note ${i}`, "ok", agent.rows[0]!.id);
    const indexer = worker(client(), { turnsPerPass: 3 });
    await indexer.cycle();
    const indexed = async () =>
      (
        await testDb.db.query<{ source_id: number }>(
          "SELECT source_id FROM embedding_chunks WHERE source = 'turn' ORDER BY source_id",
        )
      ).rows.map((row) => row.source_id);
    expect(await indexed()).toHaveLength(10);
    expect(await indexed()).not.toContain(open.rows[0]!.id);
    await testDb.db.query(
      "INSERT INTO messages (role, content, search_text, inbox_id) VALUES ('assistant', '{}', 'Sunny.', $1)",
      [inbox.rows[0]!.id],
    );
    await testDb.db.query("UPDATE inbox SET status = 'done' WHERE id = $1", [inbox.rows[0]!.id]);
    await indexer.cycle();
    expect(await indexed()).toHaveLength(11);
    const chunk = await testDb.db.query<{ content: string }>(
      "SELECT content FROM embedding_chunks WHERE source_id = $1",
      [open.rows[0]!.id],
    );
    expect(chunk.rows[0]?.content).toMatch(
      / · telegram · owner\]\nUser: what is the weather\nAssistant: Sunny\.$/,
    );
  });

  it("isolates a text the provider refuses by splitting its batch, and never stores a zero vector", async () => {
    for (let i = 0; i < 9; i++)
      await testDb.db.query("INSERT INTO memories (content) VALUES ($1)", [`fact ${i}`]);
    await testDb.db.query("INSERT INTO memories (content) VALUES ('FORBIDDEN words here')");
    fake.refuse("FORBIDDEN");
    await worker(client()).cycle();
    expect(await statuses()).toEqual({ ok: 9, rejected: 1 });
    const refused = await testDb.db.query<{ content: string; last_error: string; embedding: unknown }>(
      "SELECT content, last_error, embedding FROM embedding_chunks WHERE status = 'rejected'",
    );
    expect(refused.rows[0]?.content).toContain("FORBIDDEN");
    expect(refused.rows[0]?.last_error).toMatch(/refused the input \(HTTP 400: .*content filter/);
    expect(refused.rows[0]?.embedding).toBeNull();
    // 10, then halves down to the refused one alone: no call was given up on a good row.
    expect(fake.calls[0]?.inputs).toHaveLength(10);
    expect(fake.calls.at(-1)?.inputs.length).toBeGreaterThan(0);
    expect(fake.calls.some((call) => call.inputs.length === 1 && call.inputs[0]!.includes("FORBIDDEN"))).toBe(
      true,
    );
  });

  it("waits with a backoff when the provider fails, and keeps the rows waiting", async () => {
    await turn("remember the blue door", "Yes.");
    fake.failNext(500, "The server had an error while processing your request.");
    const embeddings = client();
    await worker(embeddings).cycle();
    const row = await testDb.db.query<{ status: string; attempts: number; due: boolean; last_error: string }>(
      "SELECT status, attempts, next_attempt_at > now() AS due, last_error FROM embedding_chunks",
    );
    expect(row.rows[0]).toMatchObject({ status: "pending", attempts: 1, due: true });
    expect(row.rows[0]?.last_error).toContain("HTTP 500");
    await worker(embeddings).cycle();
    expect(fake.calls).toHaveLength(1);
    await testDb.db.query("UPDATE embedding_chunks SET next_attempt_at = now()");
    await worker(embeddings).cycle();
    expect(await statuses()).toEqual({ ok: 1 });
  });

  it("finds a paraphrase that full text misses, with its source and date", async () => {
    const id = await turn("my sister's flat is in Thessaloniki", "Noted: your sister lives in Thessaloniki.");
    await turn("the car needs new tyres", "I will remind you.");
    const embeddings = client();
    await worker(embeddings).cycle();
    const withMeaning = createDbSearchTool({
      db: testDb.db,
      semantic: (query, agentId, limit) =>
        search(embeddings, query, agentId).then((r) => ({ ...r, hits: r.hits.slice(0, limit) })),
    });
    const wordsOnly = createDbSearchTool({ db: testDb.db });
    const question = { query: "where does my sibling live?" };
    const plain = await wordsOnly.execute("1", question);
    expect(JSON.stringify(plain.content)).toContain("No results found");
    const found = (await withMeaning.execute("1", question)).content[0];
    const text = found?.type === "text" ? found.text : "";
    expect(text.split("\n")[1]).toMatch(
      new RegExp(
        `^\\[turn ${id}\\] \\[\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC · console · owner\\] User: my sister's flat is in Thessaloniki`,
      ),
    );
    expect(text).not.toContain("tyres");
    // The index itself is not listed as one of the owner's tables.
    const byWord = JSON.stringify((await withMeaning.execute("2", { query: "Thessaloniki" })).content);
    expect(byWord).toContain(`[turn ${id}]`);
    expect(byWord).not.toContain("Table: embedding_chunks");
  });

  it("before the index's first pass, db_search finds the messages by their words as without embeddings", async () => {
    const id = await turn("my sister's flat is in Thessaloniki", "Noted.");
    const tool = createDbSearchTool({
      db: testDb.db,
      semantic: (query, agentId, limit) =>
        fusedSearch({ db: testDb.db, client: client(), cache: new VectorCache() }, query, agentId, limit),
    });
    const found = JSON.stringify((await tool.execute("1", { query: "Thessaloniki" })).content);
    expect(found).toContain(`[id:${id}]`);
    expect(fake.calls).toHaveLength(0);
  });

  it("a subagent finds only its own conversation, and the owner's agent only the owner's", async () => {
    await turn("my sister's flat is in Thessaloniki", "Noted.");
    const agent = await testDb.db.query<{ id: number }>(
      "INSERT INTO agents (name) VALUES ('helper') RETURNING id",
    );
    const helper = agent.rows[0]!.id;
    await turn("my brother's apartment is in Athens", "Understood.", helper);
    await testDb.db.query(
      "INSERT INTO memories (content) VALUES ('The owner''s sister lives in Thessaloniki')",
    );
    const embeddings = client();
    await worker(embeddings).cycle();
    const mine = await search(embeddings, "where does my sibling live?", helper);
    expect(mine.hits.map((hit) => hit.content).join("\n")).toContain("Athens");
    expect(mine.hits.map((hit) => hit.content).join("\n")).not.toContain("Thessaloniki");
    const owners = await search(embeddings, "where does my sibling live?", 1);
    const text = owners.hits.map((hit) => hit.content).join("\n");
    expect(text).toContain("Thessaloniki");
    expect(text).not.toContain("Athens");
    expect(owners.hits.map((hit) => hit.source).sort()).toEqual(["memory", "turn"]);
  });

  it("a new model's index is built beside the old one and swapped in; vectors of two models are never compared", async () => {
    for (let i = 0; i < 6; i++) await turn(`the garden note ${i}`, "ok");
    await turn("my sister's flat is in Thessaloniki", "Noted.");
    const first = client("fake-embed-a");
    await worker(first).cycle();
    expect(await liveIdentity(testDb.db)).toBe(first.identity);

    const second = client("fake-embed-b");
    const rebuilding = worker(second, { batchSize: 2, batchesPerCycle: 1 });
    await rebuilding.cycle();
    expect(await statuses(second.identity)).toEqual({ ok: 2, pending: 5 });
    // While it builds, the old index stays live and the new model's query is not compared with it.
    expect(await liveIdentity(testDb.db)).toBe(first.identity);
    const during = await search(second, "where does my sibling live?");
    expect(during.note).toContain("being rebuilt");
    expect(during.hits).toEqual([]);
    const byWords = await search(second, "Thessaloniki");
    expect(byWords.hits[0]?.content).toContain("Thessaloniki");

    for (let i = 0; i < 5; i++) await rebuilding.cycle();
    expect(await liveIdentity(testDb.db)).toBe(second.identity);
    expect(await statuses(first.identity)).toEqual({});
    expect(await statuses()).toEqual({ ok: 7 });
    const after = await search(second, "where does my sibling live?");
    expect(after.note).toBeUndefined();
    expect(after.hits[0]?.content).toContain("my sister's flat is in Thessaloniki");
  });

  it("a rebuild given up (the model changed back) leaves no rows behind", async () => {
    for (let i = 0; i < 4; i++) await turn(`the garden note ${i}`, "ok");
    const first = client("fake-embed-a");
    await worker(first).cycle();
    const second = client("fake-embed-b");
    await worker(second, { batchSize: 1, batchesPerCycle: 1 }).cycle();
    expect(await statuses(second.identity)).toEqual({ ok: 1, pending: 3 });
    await worker(first).cycle();
    expect(await liveIdentity(testDb.db)).toBe(first.identity);
    expect(await statuses(second.identity)).toEqual({});
    expect(await statuses()).toEqual({ ok: 4 });
  });

  it("a worker stopped during a call leaves its rows waiting; the next one finishes them, once each", async () => {
    for (let i = 0; i < 20; i++) await turn(`garden note ${i}`, "ok");
    fake.setDelay(2_000);
    const stopped = new EmbeddingsWorker({
      db: testDb.db,
      client: client(),
      logger: silentLogger,
      batchSize: 8,
      intervalMs: 50,
    });
    stopped.start();
    await expect.poll(() => fake.calls.length, { timeout: 10_000 }).toBeGreaterThan(0);
    await stopped.stop();
    expect(await statuses()).toEqual({ pending: 20 });
    fake.setDelay(0);
    await worker(client(), { batchSize: 8 }).cycle();
    expect(await statuses()).toEqual({ ok: 20 });
    const counted = await testDb.db.query<{ n: number; distinct: number }>(
      "SELECT count(*)::int AS n, count(DISTINCT source_id)::int AS distinct FROM embedding_chunks",
    );
    expect(counted.rows[0]).toEqual({ n: 20, distinct: 20 });
  });

  it("indexes scratchpad entries and compaction summaries of the conversation they belong to", async () => {
    const said = await turn("we talked about the garden", "ok");
    await testDb.db.query(
      "INSERT INTO scratchpad (title, body) VALUES ('Trip', 'book the apartment in Athens')",
    );
    await testDb.db.query("INSERT INTO compactions (summary, up_to_message_id) VALUES ($1, $2)", [
      "SUMMARY: the owner's brother lives in Athens.",
      said,
    ]);
    const embeddings = client();
    await worker(embeddings).cycle();
    expect(await statuses()).toEqual({ ok: 3 });
    const found = await search(embeddings, "where does my sibling live?");
    expect(found.hits[0]).toMatchObject({ source: "compaction" });
    expect(found.hits[0]?.content).toMatch(
      /^\[[^\]]+ · summary of earlier conversation · assistant\]\nSUMMARY/,
    );
    expect(found.hits.map((hit) => hit.source)).toContain("scratchpad");
  });

  it("a memory changed after it was indexed is indexed again; one removed leaves no row", async () => {
    const memory = await testDb.db.query<{ id: number }>(
      "INSERT INTO memories (content) VALUES ('the dog is called Rex') RETURNING id",
    );
    const embeddings = client();
    await worker(embeddings).cycle();
    await testDb.db.query(
      "UPDATE memories SET content = 'the puppy is called Max', updated_at = now() WHERE id = $1",
      [memory.rows[0]!.id],
    );
    await worker(embeddings).cycle();
    expect(fake.inputs().at(-1)).toContain("the puppy is called Max");
    expect(await statuses()).toEqual({ ok: 1 });
    await testDb.db.query("DELETE FROM memories");
    await worker(embeddings).cycle();
    expect(await statuses()).toEqual({});
  });

  it("indexes the latest version of each page as its text; an older version or a deleted page leaves no row", async () => {
    const page = (path: string, mimetype: string, body: string) =>
      testDb.db.query(
        `INSERT INTO pages (path, version, mimetype, data)
         VALUES ($1, COALESCE((SELECT max(version) FROM pages WHERE path = $1), 0) + 1, $2, $3)`,
        [path, mimetype, Buffer.from(body)],
      );
    await page(
      "trips",
      "text/html",
      "<html><body><h1>Trips</h1><script>x()</script><p>Our apartment in Athens</p></body></html>",
    );
    await page("chart", "image/png", "\x89PNG");
    const embeddings = client();
    await worker(embeddings).cycle();
    const rows = async () =>
      (
        await testDb.db.query<{ content: string }>(
          "SELECT content FROM embedding_chunks WHERE source = 'page'",
        )
      ).rows;
    expect((await rows()).map((row) => row.content)).toEqual([
      expect.stringMatching(/^\[[^\]]+ · page trips · assistant\]\n# Trips\n+Our apartment in Athens$/),
    ]);
    const found = await search(embeddings, "where is the flat?");
    expect(found.hits[0]).toMatchObject({ source: "page" });

    await page("trips", "text/html", "<p>Our house in Thessaloniki</p>");
    await worker(embeddings).cycle();
    expect((await rows()).map((row) => row.content)).toEqual([
      expect.stringContaining("Our house in Thessaloniki"),
    ]);
    await page("trips", "text/html", "");
    await worker(embeddings).cycle();
    expect(await rows()).toEqual([]);
  });
});
