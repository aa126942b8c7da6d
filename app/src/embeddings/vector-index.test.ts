import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { startFakeEmbeddings, type FakeEmbeddings } from "@stavrobot/common/test-support";
import { bothDatabases } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import { migrate } from "../db/migrations.js";
import { fakeEmbeddingsClient, insertTurn } from "../../test/helpers/embeddings.js";
import type { EmbeddingsClient } from "./client.js";
import { fusedSearch, VectorCache } from "./search.js";
import { liveIdentity } from "./state.js";
import { indexName, VectorIndexes } from "./vector-index.js";
import { EmbeddingsWorker } from "./worker.js";

let fake: FakeEmbeddings;
beforeAll(async () => {
  fake = await startFakeEmbeddings({ apiKey: "sk-test" });
});
afterAll(() => fake.close());

const client = (model: string): EmbeddingsClient => fakeEmbeddingsClient(fake.url, model);
const turn = insertTurn;

async function annIndexes(db: Database): Promise<string[]> {
  const result = await db.query<{ indexname: string }>(
    "SELECT indexname FROM pg_indexes WHERE tablename = 'embedding_chunks' AND indexname LIKE 'embedding_chunks_ann_%' ORDER BY 1",
  );
  return result.rows.map((row) => row.indexname);
}

describe.each(bothDatabases("vector-index"))("the vector index on %s", (kind, open) => {
  let db: Database;
  let done: () => Promise<void>;
  beforeAll(async () => {
    ({ db, done } = await open());
    await migrate(db);
  });
  afterAll(() => done());

  // The embedded database always has pgvector (PGlite's package); Debian's PostgreSQL has not.
  const hasVector = kind === "pglite";

  it(
    hasVector
      ? "is made for the identity in use, used by the search, and dropped when a rebuild replaces it"
      : "is said to be unavailable, and the search compares vectors in the app instead",
    async () => {
      const indexes = new VectorIndexes(db, silentLogger);
      const state = await indexes.prepare();
      if (!hasVector) {
        expect(state).toMatchObject({ kind: "unavailable" });
        expect(state.kind === "unavailable" && state.reason).toMatch(/has no pgvector/);
      } else {
        expect(state).toMatchObject({ kind: "available" });
        expect(state.kind === "available" && state.version).toMatch(/^0\.(8|9)|^[1-9]/);
      }

      const sister = await turn(db, "my sister's flat is in Thessaloniki", "Noted: your sister lives there.");
      await turn(db, "the car needs new tyres", "I will remind you.");
      // Another conversation (a contact's agent) is never a result of the owner's search.
      const agent = await db.query<{ id: number }>(
        "INSERT INTO agents (name, system_prompt) VALUES ('contact', '') RETURNING id",
      );
      const contactAgent = agent.rows[0]!.id;
      await turn(db, "my brother's house is in Patras", "Noted.", contactAgent);

      const first = client("fake-embed-a");
      const cache = new VectorCache();
      const worker = new EmbeddingsWorker({
        db,
        client: first,
        logger: silentLogger,
        indexes,
        changed: () => cache.invalidate(),
      });
      await worker.cycle();
      const dimensions = 64;
      expect(await annIndexes(db)).toEqual(hasVector ? [indexName(first.identity, dimensions)] : []);
      expect(indexes.covers(first.identity, dimensions)).toBe(hasVector);

      const search = (embeddings: EmbeddingsClient, query: string, agentId = 1) =>
        fusedSearch({ db, client: embeddings, cache, index: indexes }, query, agentId, 5);
      const found = await search(first, "where does my sibling live?");
      expect(found?.note).toBeUndefined();
      expect(found?.hits[0]).toMatchObject({ source: "turn", sourceId: sister });
      expect(found?.hits[0]?.similarity).toBeGreaterThan(0.3);
      expect(found?.hits.map((hit) => hit.content).join("\n")).not.toContain("Patras");

      if (hasVector) {
        // The index matches the search's own statement (its text names the rows the partial
        // index holds); with three rows a scan is cheaper, so the planner is told not to scan.
        const plan = await db.transaction(async (tx) => {
          await tx.query("SET LOCAL hnsw.iterative_scan = relaxed_order");
          await tx.query("SET LOCAL enable_seqscan = off");
          const vector = `[${new Array(dimensions).fill(0).map((_, i) => (i === 0 ? 1 : 0))}]`;
          const literal = first.identity.replaceAll("'", "''");
          return tx.query<{ "QUERY PLAN": string }>(
            `EXPLAIN SELECT id FROM embedding_chunks
             WHERE identity = '${literal}' AND status = 'ok' AND array_length(embedding, 1) = ${dimensions} AND agent_id = $2
             ORDER BY binary_quantize(embedding::vector(${dimensions}))::bit(${dimensions}) <~> binary_quantize($1::vector(${dimensions}))::bit(${dimensions})
             LIMIT 200`,
            [vector, 1],
          );
        });
        expect(plan.rows.map((row) => row["QUERY PLAN"]).join("\n")).toContain(
          indexName(first.identity, dimensions),
        );
        // A vector of another length under the same identity is written, and simply not indexed.
        await db.query(
          `INSERT INTO embedding_chunks (identity, source, source_id, agent_id, source_at, content, content_hash, status, embedding)
           VALUES ($1, 'memory', 999, 1, now(), 'odd', 'odd', 'ok', $2::real[])`,
          [first.identity, "{1,0,0}"],
        );
        await db.query("DELETE FROM embedding_chunks WHERE content_hash = 'odd'");
      }

      // The model changes: a rebuild beside the old rows, indexed too, and the old index dropped
      // once the new rows replace the old.
      const second = client("fake-embed-b");
      const rebuild = new EmbeddingsWorker({
        db,
        client: second,
        logger: silentLogger,
        indexes,
        changed: () => cache.invalidate(),
      });
      await rebuild.cycle();
      expect(await liveIdentity(db)).toBe(second.identity);
      expect(await annIndexes(db)).toEqual(hasVector ? [indexName(second.identity, dimensions)] : []);
      const again = await search(second, "where does my sibling live?");
      expect(again?.hits[0]).toMatchObject({ source: "turn", sourceId: sister });
      const contact = await search(second, "where does my sibling live?", contactAgent);
      expect(contact?.hits.map((hit) => hit.content).join("\n")).toContain("Patras");
      expect(contact?.hits.map((hit) => hit.content).join("\n")).not.toContain("Thessaloniki");
    },
  );
});
