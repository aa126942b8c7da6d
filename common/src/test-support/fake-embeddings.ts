import { createHash } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import { listen } from "../http/serve.js";
import { isRecord, sendJson } from "./fake-llm.js";

/**
 * A fake of OpenAI's `POST /v1/embeddings`: `input` a string or a list of them, `model`,
 * `dimensions`, `encoding_format` ("float"; "base64" is refused as unsupported here); the answer
 * is `{object: "list", data: [{object, index, embedding}], model, usage}`, errors in OpenAI's
 * `{"error": {message, type, param, code}}` shape. Its vectors put words of one meaning together:
 * each word of a small concept table (sister, sibling, brother; flat, apartment, live, …) counts
 * on its concept's axis, any other word on an axis picked by its hash, more weakly. Each model
 * name lays the axes out in its own order, so vectors of two models do not compare.
 */

/** Words that mean one thing to the fake, by concept. */
export const FAKE_CONCEPTS: readonly (readonly string[])[] = [
  ["sister", "sibling", "brother", "siblings", "sisters", "brothers"],
  ["flat", "apartment", "home", "house", "live", "lives", "living", "reside", "resides", "stays"],
  ["mother", "mom", "mum", "father", "dad", "parent", "parents"],
  ["car", "vehicle", "automobile"],
  ["doctor", "physician", "gp", "dentist", "appointment"],
  ["birthday", "born", "anniversary"],
  ["dog", "cat", "pet", "puppy", "kitten"],
  ["dinner", "lunch", "meal", "food", "eat", "restaurant"],
  ["key", "keys", "spare"],
  ["thessaloniki", "athens", "city", "town"],
];

const STOPWORDS = new Set(
  "a an the is are was were be been my your our his her their its in on at of to for from and or but with by as it this that these those i you we they he she me him them do does did where what who when how which there here have has had not no yes so if then than about into over under up down out".split(
    " ",
  ),
);

export interface EmbeddingsCall {
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
  inputs: string[];
}

export interface FakeEmbeddings {
  /** Base URL including "/v1", as OpenAI clients take it. */
  url: string;
  calls: EmbeddingsCall[];
  /** Every input sent so far, in order. */
  inputs(): string[];
  /** A request with an input containing this text is refused with a 400, as OpenAI refuses. */
  refuse(text: string): void;
  /** The next calls fail with this status (e.g. 429, 500, 401), one per call queued. */
  failNext(status: number, message?: string): void;
  /** Each answer waits this long first. */
  setDelay(ms: number): void;
  close(): Promise<void>;
}

/** The fake's vector of a text under a model: what the server answers, for tests that compare. */
export function fakeEmbedding(text: string, model: string, dimensions = 64): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  const order = axisOrder(model, dimensions);
  const conceptAxes = Math.min(FAKE_CONCEPTS.length, dimensions);
  for (const word of words(text)) {
    const concept = FAKE_CONCEPTS.findIndex((members) => members.includes(word));
    if (concept >= 0 && concept < conceptAxes) {
      vector[order[concept] as number]! += 1;
    } else if (dimensions > conceptAxes) {
      const hash = createHash("sha256").update(word).digest().readUInt32BE(0);
      vector[order[conceptAxes + (hash % (dimensions - conceptAxes))] as number]! += 0.3;
    }
  }
  return vector;
}

function words(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/['’]s\b/g, "")
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 0 && !STOPWORDS.has(word));
}

/** A permutation of the axes seeded by the model's name. */
function axisOrder(model: string, dimensions: number): number[] {
  const order = Array.from({ length: dimensions }, (_, i) => i);
  let seed = createHash("sha256").update(model).digest().readUInt32BE(0);
  for (let i = dimensions - 1; i > 0; i--) {
    seed = (seed * 1_103_515_245 + 12_345) >>> 0;
    const j = seed % (i + 1);
    [order[i], order[j]] = [order[j] as number, order[i] as number];
  }
  return order;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

export async function startFakeEmbeddings(options: { apiKey?: string } = {}): Promise<FakeEmbeddings> {
  const calls: EmbeddingsCall[] = [];
  const refused: string[] = [];
  const failures: { status: number; message: string }[] = [];
  let delayMs = 0;
  const error = (status: number, message: string, type = "invalid_request_error") => ({
    status,
    body: { error: { message, type, param: null, code: null } },
  });

  const server = createServer((req, res) => {
    void (async () => {
      if (req.method !== "POST" || req.url !== "/v1/embeddings") {
        sendJson(res, 404, error(404, `Unknown request URL: ${req.method} ${req.url}`).body);
        return;
      }
      if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
        const answer = error(401, "Incorrect API key provided.", "invalid_request_error");
        sendJson(res, answer.status, answer.body);
        return;
      }
      let body: unknown;
      try {
        body = await readJson(req);
      } catch {
        sendJson(res, 400, error(400, "We could not parse the JSON body of your request.").body);
        return;
      }
      const answer = respond(body, req.headers);
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (res.destroyed) return;
      sendJson(res, answer.status, answer.body);
    })();
  });

  function respond(body: unknown, headers: EmbeddingsCall["headers"]): { status: number; body: unknown } {
    if (!isRecord(body)) return error(400, "The body must be a JSON object.");
    const input = body.input;
    const inputs = typeof input === "string" ? [input] : Array.isArray(input) ? input : undefined;
    if (!inputs || inputs.length === 0 || !inputs.every((item) => typeof item === "string"))
      return error(400, "'input' must be a non-empty string or array of strings.");
    calls.push({ headers, body, inputs: inputs as string[] });
    const failure = failures.shift();
    if (failure)
      return error(failure.status, failure.message, failure.status >= 500 ? "server_error" : undefined);
    if (typeof body.model !== "string" || body.model.length === 0)
      return error(400, "you must provide a model parameter");
    if (body.encoding_format !== undefined && body.encoding_format !== "float")
      return error(400, "this fake answers encoding_format float only");
    if (inputs.length > 2048) return error(400, "'input' must have at most 2048 items.");
    const dimensions = body.dimensions === undefined ? 64 : body.dimensions;
    if (typeof dimensions !== "number" || !Number.isInteger(dimensions) || dimensions < 1)
      return error(400, "'dimensions' must be a positive integer.");
    for (const [index, item] of (inputs as string[]).entries()) {
      if (item.trim().length === 0) return error(400, `'input[${index}]' must not be empty.`);
      if (refused.some((text) => item.includes(text)))
        return error(400, "Invalid 'input': the input was rejected by the content filter.");
    }
    const model = body.model;
    return {
      status: 200,
      body: {
        object: "list",
        data: (inputs as string[]).map((item, index) => ({
          object: "embedding",
          index,
          embedding: fakeEmbedding(item, model, dimensions),
        })),
        model,
        usage: {
          prompt_tokens: (inputs as string[]).reduce((sum, item) => sum + words(item).length, 0),
          total_tokens: (inputs as string[]).reduce((sum, item) => sum + words(item).length, 0),
        },
      },
    };
  }

  const port = await listen(server, 0);
  return {
    url: `http://127.0.0.1:${port}/v1`,
    calls,
    inputs: () => calls.flatMap((call) => call.inputs),
    refuse: (text) => void refused.push(text),
    failNext: (status, message = `fake failure ${status}`) => void failures.push({ status, message }),
    setDelay: (ms) => {
      delayMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
