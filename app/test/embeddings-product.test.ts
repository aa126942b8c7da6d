import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import {
  startFakeAnthropic,
  startFakeEmbeddings,
  textTurn,
  toolTurn,
  type FakeEmbeddings,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import type { Check, Checked } from "../src/doctor/checks.js";
import { PASSWORD, chat, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { startProduct, type Product } from "./helpers/product.js";

/**
 * Search by meaning in the product as people run it (`npm start`, on either database): the index
 * is kept in the background while turns run, a kill -9 in the middle of indexing loses and
 * doubles nothing, and db_search then finds what was meant.
 */
let fake: FakeLlmServer;
let embeddings: FakeEmbeddings;
let testEnv: TestEnv;
let running: Product | undefined;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  embeddings = await startFakeEmbeddings({ apiKey: "sk-embed" });
  testEnv = await createTestEnv(
    configFor(
      fake,
      "anthropic",
      `[embeddings]\nbaseUrl = "${embeddings.url}"\napiKey = "sk-embed"\nmodel = "fake-embed-small"\ndimensions = 48\n`,
    ),
  );
});
afterAll(async () => {
  await running?.stop("SIGKILL");
  await testEnv?.cleanup();
  await embeddings?.close();
  await fake?.close();
});

async function embeddingsCheck(port: number): Promise<Check | undefined> {
  const answer = await fetch(`http://127.0.0.1:${port}/health?deep=1`, {
    headers: { Authorization: basicAuthHeader(PASSWORD) },
  });
  const checked = (await answer.json()) as Checked;
  return checked.checks.find((check) => check.name === "embeddings");
}

const start = () => startProduct(testEnv, { env: { EMBEDDINGS_INTERVAL_SECONDS: "0.2" } });

describe("search by meaning in the running product", () => {
  it("indexes in the background without holding a turn, resumes after kill -9 once per turn, and finds the paraphrase", async () => {
    // The provider hangs on the first batch: the turns are answered all the same.
    embeddings.setDelay(120_000);
    running = await start();
    const said = [
      "my sister's flat is in Thessaloniki",
      "water the tomatoes on Friday",
      "the car is due a service",
    ];
    for (const message of said) {
      fake.enqueue(textTurn(`Noted: ${message}.`));
      const started = Date.now();
      const answer = await chat(running, message);
      expect(answer.status).toBe(200);
      expect(answer.body.response).toBe(`Noted: ${message}.`);
      expect(Date.now() - started).toBeLessThan(10_000);
    }
    // A batch is on its way to the provider when the product is killed. (The calls before it may
    // be recall's queries: a turn after the index's first pass asks for its words' vector.)
    const isChunk = (input: string) => input.includes("User: my sister's flat is in Thessaloniki");
    await vi.waitFor(() => expect(embeddings.inputs().some(isChunk)).toBe(true), { timeout: 30_000 });
    const inFlight = embeddings.inputs();
    await running.stop("SIGKILL");
    running = undefined;

    embeddings.setDelay(0);
    running = await start();
    const port = running.port;
    await vi.waitFor(
      async () =>
        expect((await embeddingsCheck(port))?.detail).toMatch(/index: 3 indexed, 0 waiting, 0 refused/),
      { timeout: 60_000, interval: 250 },
    );
    // The embedded database searches through pgvector's index (its package loaded by the bundle);
    // a server without the extension compares in the app, and says why.
    expect((await embeddingsCheck(port))?.detail).toMatch(
      process.env.TEST_DATABASE_URL
        ? /compared exactly in the app, over the newest 10,000 chunks of a conversation: the database has no pgvector/
        : /found through pgvector 0\.\d+\.\d+'s HNSW index, over all of the history/,
    );
    // What was in flight was sent again, and each turn's chunk once more at most: no turn lost.
    const after = embeddings.inputs().slice(inFlight.length);
    for (const message of said) expect(after.filter((input) => input.includes(message))).toHaveLength(1);

    fake.enqueue(
      toolTurn("db_search", { query: "where does my sibling live?" }),
      textTurn("In Thessaloniki."),
    );
    const before = fake.requests.length;
    expect((await chat(running, "where does my sibling live?")).status).toBe(200);
    const found = fake.requests[before + 1]?.lastUserText ?? "";
    expect(found).toMatch(
      /^Found \(\d+, best first\):\n\[turn \d+\] \[[^\]]+ · cli · owner\] User: my sister's flat is in Thessaloniki/,
    );
  });
});
