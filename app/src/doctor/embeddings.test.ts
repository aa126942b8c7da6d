import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeEmbeddings, type FakeEmbeddings } from "@stavrobot/common/test-support";
import { createEmbeddingsClient } from "../embeddings/client.js";
import type { IndexProgress } from "../embeddings/worker.js";
import { embeddingsCheck } from "./embeddings.js";

let fake: FakeEmbeddings;
beforeAll(async () => {
  fake = await startFakeEmbeddings({ apiKey: "sk-right" });
});
afterAll(async () => {
  await fake.close();
});

const config = (apiKey: string) => ({
  baseUrl: fake.url,
  apiKey,
  model: "fake-embed",
  dimensions: 48,
  queryPrefix: "",
  documentPrefix: "",
});

function progress(identity: string, extra: Partial<IndexProgress> = {}) {
  return async (): Promise<IndexProgress> => ({
    identity,
    live: identity,
    ok: 12,
    waiting: 3,
    rejected: 1,
    empty: 0,
    problem: undefined,
    ...extra,
  });
}

describe("the doctor's embeddings check", () => {
  it("makes one small call and shows the index's progress and how it searches", async () => {
    const client = createEmbeddingsClient(config("sk-right"));
    const before = fake.calls.length;
    const check = await embeddingsCheck({ client, progress: progress(client.identity) });
    expect(fake.calls.length - before).toBe(1);
    expect(fake.calls.at(-1)?.inputs).toEqual(["doctor"]);
    expect(check.state).toBe("ok");
    expect(check.detail).toBe(
      `${client.identity}, 48 dimensions answered; index: 12 indexed, 3 waiting, 1 refused. Vectors are compared exactly in the app, over the newest 10,000 chunks of a conversation until the index's first pass checks for pgvector.`,
    );
    const indexed = await embeddingsCheck({
      client,
      progress: progress(client.identity, { vectorIndex: { kind: "available", version: "0.8.7" } }),
    });
    expect(indexed.detail).toContain(
      "Vectors are found through pgvector 0.8.7's HNSW index, over all of the history.",
    );
    const without = await embeddingsCheck({
      client,
      progress: progress(client.identity, {
        vectorIndex: {
          kind: "unavailable",
          reason: 'the database has no pgvector (extension "vector" is not available)',
        },
      }),
    });
    expect(without.detail).toContain(
      'compared exactly in the app, over the newest 10,000 chunks of a conversation: the database has no pgvector (extension "vector" is not available). A database with pgvector 0.8 or newer (the embedded one has it) indexes them all.',
    );
  });

  it("fails a refused key, saying where to correct it", async () => {
    const client = createEmbeddingsClient(config("sk-wrong"));
    const check = await embeddingsCheck({ client, progress: progress(client.identity) });
    expect(check).toMatchObject({ state: "fail" });
    expect(check.detail).toContain("refused the key (HTTP 401");
    expect(check.fix).toBe(
      "Correct [embeddings] in config.toml and restart; until then db_search finds words only.",
    );
  });

  it("warns while indexing is stopped, with why", async () => {
    const client = createEmbeddingsClient(config("sk-right"));
    const check = await embeddingsCheck({
      client,
      progress: progress(client.identity, { problem: "the embeddings provider answered HTTP 503" }),
    });
    expect(check).toMatchObject({
      state: "warn",
      fix: "Indexing stopped: the embeddings provider answered HTTP 503",
    });
  });
});
