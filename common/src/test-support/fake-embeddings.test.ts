import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fakeEmbedding, startFakeEmbeddings, type FakeEmbeddings } from "./fake-embeddings.js";
import type { Json } from "./json-request.js";

let fake: FakeEmbeddings;
beforeAll(async () => {
  fake = await startFakeEmbeddings();
});
afterAll(async () => {
  await fake.close();
});

const post = (body: unknown) =>
  fetch(`${fake.url}/embeddings`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  }).then(async (response) => ({
    status: response.status,
    body: (await response.json()) as Json,
  }));

const cosine = (a: number[], b: number[]) =>
  a.reduce((sum, value, i) => sum + value * (b[i] as number), 0) / (Math.hypot(...a) * Math.hypot(...b));

describe("the fake embeddings server", () => {
  it("answers a string input in OpenAI's shape, with the dimensions asked for", async () => {
    const answer = await post({ model: "m", input: "my sister", dimensions: 16 });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      object: "list",
      model: "m",
      usage: { prompt_tokens: 1, total_tokens: 1 },
    });
    expect(answer.body.data).toHaveLength(1);
    expect(answer.body.data[0]).toMatchObject({ object: "embedding", index: 0 });
    expect(answer.body.data[0].embedding).toHaveLength(16);
  });

  it("puts words of one meaning together, and lays each model's axes out differently", () => {
    const asked = fakeEmbedding("where does my sibling live?", "m");
    expect(cosine(asked, fakeEmbedding("my sister's flat is in Thessaloniki", "m"))).toBeGreaterThan(0.5);
    expect(cosine(asked, fakeEmbedding("the car needs new tyres", "m"))).toBeLessThan(0.1);
    expect(cosine(asked, fakeEmbedding("where does my sibling live?", "other"))).toBeLessThan(0.5);
  });

  it("refuses as OpenAI does: a named input, an empty one, no model, base64", async () => {
    fake.refuse("forbidden");
    const refused = await post({ model: "m", input: ["fine", "forbidden text"] });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ type: "invalid_request_error", param: null, code: null });
    expect((await post({ model: "m", input: [""] })).status).toBe(400);
    expect((await post({ input: "x" })).status).toBe(400);
    expect((await post({ model: "m", input: "x", encoding_format: "base64" })).status).toBe(400);
  });
});
