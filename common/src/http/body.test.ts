import { setTimeout as sleep } from "node:timers/promises";
import { describe, it, expect, beforeAll, afterAll } from "vitest";
import { createServer, request } from "node:http";
import type { Server } from "node:http";
import { z } from "zod";
import { silentLogger } from "../logger.js";
import { readBody, readJsonObject, readValidJson } from "./body.js";
import { Router } from "./router.js";
import { closeServer, createRequestListener, listen } from "./serve.js";

const LIMIT = 100;

const messageSchema = z.object({ message: z.string().min(1), count: z.number().int().optional() });

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function json(answer: Answer): Record<string, unknown> {
  return JSON.parse(answer.body) as Record<string, unknown>;
}

describe("body readers behind a real server", () => {
  let server: Server;
  let port: number;
  let base: string;
  let handlerCompleted = 0;

  beforeAll(async () => {
    const router = new Router()
      .post("/raw", async ({ req }) => {
        const body = await readBody(req, LIMIT);
        handlerCompleted++;
        return { json: { bytes: body.length, text: body.toString("utf8") } };
      })
      .post("/object", async ({ req }) => ({ json: { got: await readJsonObject(req, LIMIT) } }))
      .post("/valid", async ({ req }) => ({ json: { got: await readValidJson(req, LIMIT, messageSchema) } }));
    server = createServer(createRequestListener(router, { logger: silentLogger }));
    port = await listen(server, 0);
    base = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await closeServer(server);
  });

  async function post(path: string, body: string): Promise<Answer> {
    const response = await fetch(base + path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body,
    });
    return {
      status: response.status,
      headers: Object.fromEntries(response.headers),
      body: await response.text(),
    };
  }

  /**
   * Sends a chunked body (no Content-Length) one chunk at a time and resolves with the response
   * without ever ending the request: an answer proves the server refused while still streaming.
   */
  function postChunked(path: string, chunks: string[], end: boolean): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: "127.0.0.1", port, path, method: "POST", headers: { "Content-Type": "application/json" } },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (body += chunk));
          res.on("end", () => {
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
            req.destroy();
          });
        },
      );
      req.on("error", reject);
      void (async () => {
        for (const chunk of chunks) {
          if (req.destroyed) return;
          req.write(chunk);
          await sleep(20); // Slowly, as a slow client sends.
        }
        if (end && !req.destroyed) req.end();
      })();
    });
  }

  it("reads a body within the limit", async () => {
    const a = await post("/raw", "hello");
    expect(a.status).toBe(200);
    expect(json(a)).toEqual({ bytes: 5, text: "hello" });
  });

  it("accepts a body of exactly the limit, counting bytes not characters", async () => {
    const exact = await post("/raw", "x".repeat(LIMIT));
    expect(exact.status).toBe(200);
    expect(json(exact).bytes).toBe(LIMIT);
    // 51 two-byte characters = 102 bytes: over the limit although only 51 characters.
    const multibyte = await post("/raw", "é".repeat(51));
    expect(multibyte.status).toBe(413);
  });

  it("reassembles a chunked body within the limit", async () => {
    const a = await postChunked("/raw", ["ab", "cd", "ef"], true);
    expect(a.status).toBe(200);
    expect(json(a)).toEqual({ bytes: 6, text: "abcdef" });
    expect(a.headers["transfer-encoding"]).toBeUndefined();
  });

  it("refuses a declared Content-Length over the limit with 413 and closes the connection", async () => {
    const a = await post("/raw", "y".repeat(LIMIT + 1));
    expect(a.status).toBe(413);
    expect(json(a)).toEqual({ error: "Request body too large" });
    expect(a.headers.connection).toBe("close");
  });

  it("refuses on the declared Content-Length alone, before any body byte arrives", async () => {
    const answer = await new Promise<Answer>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path: "/object",
          method: "POST",
          headers: { "Content-Type": "application/json", "Content-Length": String(10 * LIMIT) },
        },
        (res) => {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (body += chunk));
          res.on("end", () => {
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
            req.destroy();
          });
        },
      );
      req.on("error", reject);
      req.flushHeaders();
    });
    expect(answer.status).toBe(413);
    expect(json(answer)).toEqual({ error: "Request body too large" });
  });

  it("refuses an oversized chunked body with 413 while it is still streaming", async () => {
    const before = handlerCompleted;
    const chunk = "z".repeat(40);
    // 5 × 40 = 200 bytes, but the request is never ended: only a streaming check can answer.
    const a = await postChunked("/raw", [chunk, chunk, chunk, chunk, chunk], false);
    expect(a.status).toBe(413);
    expect(json(a)).toEqual({ error: "Request body too large" });
    expect(handlerCompleted).toBe(before);
  });

  it("refuses an oversized chunked JSON body on the JSON routes too", async () => {
    const a = await postChunked("/valid", ['{"message":"', "m".repeat(60), "m".repeat(60), '"}'], false);
    expect(a.status).toBe(413);
    expect(json(a).error).toBe("Request body too large");
  });

  it("readJsonObject returns the parsed object", async () => {
    const a = await post("/object", '{"a":1,"b":[true,null]}');
    expect(a.status).toBe(200);
    expect(json(a)).toEqual({ got: { a: 1, b: [true, null] } });
  });

  it("malformed JSON gives 400 whose message starts with 'Invalid JSON'", async () => {
    const a = await post("/object", '{"a":');
    expect(a.status).toBe(400);
    const error = json(a).error;
    expect(typeof error).toBe("string");
    expect(error as string).toMatch(/^Invalid JSON: ./);
  });

  it.each([
    ["an array", "[1,2,3]"],
    ["a number", "42"],
    ["a string", '"text"'],
    ["null", "null"],
  ])("%s gives 400 'Request body must be a JSON object'", async (_label, body) => {
    const a = await post("/object", body);
    expect(a.status).toBe(400);
    expect(json(a)).toEqual({ error: "Request body must be a JSON object" });
  });

  it("an empty body gives 400", async () => {
    const a = await post("/object", "");
    expect(a.status).toBe(400);
    expect(json(a).error).toMatch(/empty/i);
  });

  it("readValidJson returns the validated data", async () => {
    const a = await post("/valid", JSON.stringify({ message: "hi", count: 2 }));
    expect(a.status).toBe(200);
    expect(json(a)).toEqual({ got: { message: "hi", count: 2 } });
  });

  it("a zod validation failure gives 400 naming the field", async () => {
    const a = await post("/valid", JSON.stringify({ message: 5 }));
    expect(a.status).toBe(400);
    expect(json(a).error).toMatch(/^Invalid request: message: \S/);

    const missing = await post("/valid", JSON.stringify({ count: 1 }));
    expect(missing.status).toBe(400);
    expect(json(missing).error).toMatch(/^Invalid request: message: /);

    const twoFields = await post("/valid", JSON.stringify({ message: "", count: 1.5 }));
    expect(twoFields.status).toBe(400);
    const error = json(twoFields).error as string;
    expect(error).toContain("message: ");
    expect(error).toContain("count: ");
  });

  it("readValidJson still reports JSON-shape errors before validation", async () => {
    const a = await post("/valid", "[]");
    expect(a.status).toBe(400);
    expect(json(a)).toEqual({ error: "Request body must be a JSON object" });
  });
});
