import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeEmbeddings, type FakeEmbeddings } from "@stavrobot/common/test-support";
import {
  MAX_BATCH_CHARS,
  batches,
  createEmbeddingsClient,
  embeddingsIdentity,
  EmbeddingsError,
} from "./client.js";

let fake: FakeEmbeddings;
beforeAll(async () => {
  fake = await startFakeEmbeddings({ apiKey: "sk-right" });
});
afterAll(async () => {
  await fake.close();
});

const config = (extra: Record<string, unknown> = {}) => ({
  baseUrl: fake.url,
  apiKey: "sk-right",
  model: "fake-embed",
  queryPrefix: "",
  documentPrefix: "",
  ...extra,
});

async function failure(promise: Promise<unknown>): Promise<EmbeddingsError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(EmbeddingsError);
  return error as EmbeddingsError;
}

describe("the embeddings client", () => {
  it("sends OpenAI's request (model, dimensions, float encoding, prefix) and returns unit vectors in order", async () => {
    const client = createEmbeddingsClient(config({ dimensions: 32, queryPrefix: "search_query: " }));
    const [a, b] = await client.embed(["my sister", "a flat"], "query");
    const call = fake.calls.at(-1);
    expect(call?.body).toEqual({
      model: "fake-embed",
      input: ["search_query: my sister", "search_query: a flat"],
      encoding_format: "float",
      dimensions: 32,
    });
    expect(a).toHaveLength(32);
    expect(Math.hypot(...(b as Float32Array))).toBeCloseTo(1, 5);
  });

  it("splits many inputs into requests of at most 64", async () => {
    const before = fake.calls.length;
    const vectors = await createEmbeddingsClient(config()).embed(
      Array.from({ length: 130 }, (_, i) => `text ${i}`),
      "document",
    );
    expect(vectors).toHaveLength(130);
    expect(fake.calls.slice(before).map((call) => call.inputs.length)).toEqual([64, 64, 2]);
    expect(
      batches(["a".repeat(MAX_BATCH_CHARS - 10), "b".repeat(20), "c"]).map((batch) => batch.length),
    ).toEqual([1, 2]);
  });

  it("words its errors for the owner, by what they need", async () => {
    const wrongKey = await failure(
      createEmbeddingsClient(config({ apiKey: "sk-wrong" })).embed(["x"], "query"),
    );
    expect(wrongKey.kind).toBe("setup");
    expect(wrongKey.message).toBe(
      "the embeddings provider refused the key (HTTP 401: Incorrect API key provided.). Check [embeddings] apiKey in config.toml.",
    );
    const wrongUrl = await failure(
      createEmbeddingsClient(config({ baseUrl: fake.url.replace("/v1", "/v2") })).embed(["x"], "query"),
    );
    expect(wrongUrl.kind).toBe("setup");
    expect(wrongUrl.message).toContain("Check [embeddings] baseUrl and model in config.toml.");
    fake.refuse("forbidden");
    const refused = await failure(createEmbeddingsClient(config()).embed(["forbidden"], "document"));
    expect(refused.kind).toBe("refused");
    fake.failNext(429, "Rate limit reached");
    const busy = await failure(createEmbeddingsClient(config()).embed(["x"], "document"));
    expect(busy.kind).toBe("transient");
    expect(busy.message).toContain("HTTP 429: Rate limit reached");
    const down = await failure(
      createEmbeddingsClient(config({ baseUrl: "http://127.0.0.1:9/v1" })).embed(["x"], "document"),
    );
    expect(down.kind).toBe("transient");
    expect(down.message).toMatch(/^http:\/\/127\.0\.0\.1:9\/v1\/embeddings did not answer/);
  });

  it("names an identity by host, model and dimensions, and marks a document prefix", () => {
    expect(embeddingsIdentity(config({ dimensions: 256 }))).toMatch(/^127\.0\.0\.1:\d+:fake-embed:256$/);
    expect(embeddingsIdentity(config())).toMatch(/:fake-embed:native$/);
    expect(embeddingsIdentity(config({ documentPrefix: "search_document: " }))).toMatch(
      /:fake-embed:native:[0-9a-f]{8}$/,
    );
  });
});
