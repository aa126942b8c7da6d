import { setTimeout as sleep } from "node:timers/promises";
import { describe, it, expect, beforeAll, afterAll, vi } from "vitest";
import { createServer, request, Agent } from "node:http";
import type { IncomingHttpHeaders, Server } from "node:http";
import { connect } from "node:net";
import { DomainError, HttpError } from "../errors.js";
import type { Logger } from "../logger.js";
import { silentLogger } from "../logger.js";
import { checkBearer } from "./auth.js";
import { Router } from "./router.js";
import { closeServer, createRequestListener, listen } from "./serve.js";

const SECRET = "serve-test-secret";
const EXTRA = { "X-Content-Type-Options": "nosniff", "X-Test-Header": "on-every-response" };

interface Logged {
  message: string;
  fields: Record<string, unknown> | undefined;
}

function recordingLogger(entries: Logged[]): Logger {
  const logger: Logger = {
    ...silentLogger,
    error: (message, fields) => {
      entries.push({ message, fields });
    },
    child: () => logger,
  };
  return logger;
}

function buildRouter(): Router {
  return new Router()
    .get("/ok", () => ({ json: { hello: "world" } }))
    .get("/text", () => ({ status: 201, body: "plain", headers: { "Content-Type": "text/plain" } }))
    .get("/echo/:name", ({ params, url }) => ({ json: { name: params.name, q: url.searchParams.get("q") } }))
    .get("/teapot", () => {
      throw new HttpError(418, "I am a teapot", { hint: "use a kettle", code: 7 }, { "Retry-After": "5" });
    })
    .get("/domain/:kind", ({ params }) => {
      const kind = params.kind as DomainError["kind"];
      throw new DomainError(kind, `a ${kind} error`, kind === "invalid" ? { field: "x" } : undefined);
    })
    .get("/limited", () => {
      throw new DomainError("rate-limited", "rate_limited", { retryAfterSeconds: 42, challengeToken: "t" });
    })
    .get("/boom", () => {
      throw new Error("secret internal detail");
    })
    .get("/async-boom", async () => {
      await sleep(5);
      throw new Error("secret async detail");
    })
    .get("/self", ({ res }) => {
      res.writeHead(202, { "Content-Type": "text/plain" });
      res.end("wrote it myself");
      return undefined;
    })
    .post("/only-post", () => ({ json: { posted: true } }))
    .add("PUT", "/only-post", () => ({ json: { put: true } }))
    .get("/public", () => ({ json: { public: true } }), { public: true });
}

async function fetchJson(url: string, init?: RequestInit) {
  const response = await fetch(url, init);
  const text = await response.text();
  return { status: response.status, headers: response.headers, text };
}

describe("createRequestListener", () => {
  let server: Server;
  let base: string;
  const logged: Logged[] = [];

  beforeAll(async () => {
    server = createServer(
      createRequestListener(buildRouter(), {
        logger: recordingLogger(logged),
        headers: EXTRA,
        guard: ({ req, publicRoute }) => {
          if (publicRoute) return;
          if (!checkBearer(req.headers.authorization, SECRET)) {
            throw new HttpError(401, "Unauthorized", undefined, { "WWW-Authenticate": "Bearer" });
          }
        },
      }),
    );
    const port = await listen(server, 0);
    expect(port).toBeGreaterThan(0);
    base = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await closeServer(server);
  });

  const auth = { Authorization: `Bearer ${SECRET}` };

  it("answers a JSON reply with status 200, JSON content type and Content-Length", async () => {
    const r = await fetchJson(`${base}/ok`, { headers: auth });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(JSON.parse(r.text)).toEqual({ hello: "world" });
    expect(r.headers.get("content-length")).toBe(String(Buffer.byteLength(r.text)));
  });

  it("uses the reply's status, body and headers", async () => {
    const r = await fetchJson(`${base}/text`, { headers: auth });
    expect(r.status).toBe(201);
    expect(r.text).toBe("plain");
    expect(r.headers.get("content-type")).toBe("text/plain");
  });

  it("passes decoded params and the parsed URL to the handler", async () => {
    const r = await fetchJson(`${base}/echo/a%20b?q=1`, { headers: auth });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ name: "a b", q: "1" });
  });

  it("an HttpError gives its status, {error, ...details} JSON and its headers", async () => {
    const r = await fetchJson(`${base}/teapot`, { headers: auth });
    expect(r.status).toBe(418);
    expect(JSON.parse(r.text)).toEqual({ error: "I am a teapot", hint: "use a kettle", code: 7 });
    expect(r.headers.get("retry-after")).toBe("5");
    expect(r.headers.get("x-test-header")).toBe("on-every-response");
  });

  it("a DomainError gives the status of its kind, its message, its kind and details, and is not logged", async () => {
    const before = logged.length;
    const expected: Record<string, number> = {
      invalid: 400,
      forbidden: 403,
      "not-found": 404,
      conflict: 409,
      "too-large": 413,
      failed: 422,
      upstream: 502,
      unavailable: 503,
    };
    for (const [kind, status] of Object.entries(expected)) {
      const r = await fetchJson(`${base}/domain/${kind}`, { headers: auth });
      expect(r.status, kind).toBe(status);
      expect(JSON.parse(r.text)).toEqual({
        error: `a ${kind} error`,
        kind,
        ...(kind === "invalid" ? { field: "x" } : {}),
      });
      expect(r.headers.get("x-test-header")).toBe("on-every-response");
      expect(r.headers.get("retry-after")).toBeNull();
    }
    expect(logged.length).toBe(before);
  });

  it("a rate-limited DomainError gives 429 with its wait as Retry-After", async () => {
    const r = await fetchJson(`${base}/limited`, { headers: auth });
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("42");
    expect(JSON.parse(r.text)).toEqual({
      error: "rate_limited",
      kind: "rate-limited",
      retryAfterSeconds: 42,
      challengeToken: "t",
    });
  });

  it("a plain Error gives a bare 500 that never echoes the internal message, and is logged", async () => {
    const before = logged.length;
    const r = await fetchJson(`${base}/boom`, { headers: auth });
    expect(r.status).toBe(500);
    expect(JSON.parse(r.text)).toEqual({ error: "Internal server error" });
    expect(r.text).not.toContain("secret internal detail");
    expect(logged.length).toBe(before + 1);
    expect(logged.at(-1)?.fields?.path).toBe("/boom");
  });

  it("an async rejection is treated like a thrown Error", async () => {
    const r = await fetchJson(`${base}/async-boom`, { headers: auth });
    expect(r.status).toBe(500);
    expect(JSON.parse(r.text)).toEqual({ error: "Internal server error" });
    expect(r.text).not.toContain("secret async detail");
  });

  it("a handler that returns undefined keeps its own response", async () => {
    const r = await fetchJson(`${base}/self`, { headers: auth });
    expect(r.status).toBe(202);
    expect(r.text).toBe("wrote it myself");
  });

  it("an unknown path gives 404 {error: 'Not found'}", async () => {
    const r = await fetchJson(`${base}/nope`, { headers: auth });
    expect(r.status).toBe(404);
    expect(JSON.parse(r.text)).toEqual({ error: "Not found" });
  });

  it("a known path with the wrong method gives 405 with an Allow header", async () => {
    const r = await fetchJson(`${base}/only-post`, { headers: auth });
    expect(r.status).toBe(405);
    expect(JSON.parse(r.text)).toEqual({ error: "Method not allowed" });
    expect(r.headers.get("allow")).toBe("POST, PUT");
    const ok = await fetchJson(`${base}/only-post`, { method: "POST", headers: auth });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toEqual({ posted: true });
  });

  it("the guard can refuse with 401 before routing, even for unknown paths", async () => {
    const r = await fetchJson(`${base}/ok`);
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text)).toEqual({ error: "Unauthorized" });
    expect(r.headers.get("www-authenticate")).toBe("Bearer");

    const wrong = await fetchJson(`${base}/ok`, { headers: { Authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);

    const unknown = await fetchJson(`${base}/nope`);
    expect(unknown.status).toBe(401);

    const open = await fetchJson(`${base}/public`);
    expect(open.status).toBe(200);
    expect(JSON.parse(open.text)).toEqual({ public: true });
    // Public is the route's, not the path's: another method on it is not.
    expect((await fetchJson(`${base}/public`, { method: "POST" })).status).toBe(401);
  });

  it("adds the extra headers to every kind of response", async () => {
    const responses = await Promise.all([
      fetchJson(`${base}/ok`, { headers: auth }),
      fetchJson(`${base}/text`, { headers: auth }),
      fetchJson(`${base}/boom`, { headers: auth }),
      fetchJson(`${base}/nope`, { headers: auth }),
      fetchJson(`${base}/only-post`, { headers: auth }),
      fetchJson(`${base}/ok`),
      fetchJson(`${base}/teapot`, { headers: auth }),
    ]);
    expect(responses.map((r) => r.status)).toEqual([200, 201, 500, 404, 405, 401, 418]);
    for (const r of responses) {
      expect(r.headers.get("x-content-type-options")).toBe("nosniff");
      expect(r.headers.get("x-test-header")).toBe("on-every-response");
    }
  });

  it("answers an unparseable request URL with 400 and the extra headers", async () => {
    const port = Number(new URL(base).port);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.write("GET // HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
      });
      let data = "";
      socket.setEncoding("utf8");
      socket.on("data", (chunk: string) => (data += chunk));
      socket.on("end", () => resolve(data));
      socket.on("error", reject);
    });
    expect(raw.startsWith("HTTP/1.1 400")).toBe(true);
    expect(raw).toContain('{"error":"Invalid request URL"}');
    expect(raw.toLowerCase()).toContain("x-test-header: on-every-response");
  });
});

describe("listen and closeServer", () => {
  it("listen resolves with a real bound port and rejects when the port is taken", async () => {
    const first = createServer((_req, res) => res.end("first"));
    const port = await listen(first, 0);
    const r = await fetch(`http://127.0.0.1:${port}/`);
    expect(await r.text()).toBe("first");

    const second = createServer();
    await expect(listen(second, port)).rejects.toMatchObject({ code: "EADDRINUSE" });
    await closeServer(first);
  });

  it("answers an error the service maps with its status and headers, and only that error", async () => {
    class Outage extends Error {}
    const router = new Router()
      .get("/away", () => Promise.reject(new Outage("connection refused to 10.0.0.5")))
      .get("/bug", () => Promise.reject(new Error("internal detail")));
    const server = createServer(
      createRequestListener(router, {
        logger: silentLogger,
        mapError: (error) =>
          error instanceof Outage
            ? new HttpError(503, "Try again soon.", undefined, { "Retry-After": "5" })
            : undefined,
      }),
    );
    const port = await listen(server, 0);
    try {
      const away = await fetch(`http://127.0.0.1:${port}/away`);
      expect(away.status).toBe(503);
      expect(away.headers.get("retry-after")).toBe("5");
      expect(await away.json()).toEqual({ error: "Try again soon." });
      const bug = await fetch(`http://127.0.0.1:${port}/bug`);
      expect(bug.status).toBe(500);
      expect(await bug.json()).toEqual({ error: "Internal server error" });
    } finally {
      await closeServer(server);
    }
  });

  it("answers an error with the service's page where it makes one, keeping the status and headers", async () => {
    const router = new Router()
      .get("/teapot", () => {
        throw new HttpError(418, "I am a teapot", { hint: "kettle" }, { "Retry-After": "5" });
      })
      .get("/bug", () => Promise.reject(new Error("internal detail")))
      .get("/odd", () => {
        throw new HttpError(409, "odd");
      });
    const seen: string[] = [];
    const server = createServer(
      createRequestListener(router, {
        logger: silentLogger,
        guard: ({ req }) => {
          if (req.headers.authorization !== "let me in")
            throw new HttpError(401, "Unauthorized", undefined, { "WWW-Authenticate": "Basic" });
        },
        errorPage: async ({ req, url, error }) => {
          seen.push(`${error.status} ${error.message}`);
          if (url.pathname === "/odd") throw new Error("the page's template is missing");
          if (!req.headers.accept?.includes("text/html")) return undefined;
          return { body: `<h1>${error.status}</h1>`, headers: { "Content-Type": "text/html" } };
        },
      }),
    );
    const port = await listen(server, 0);
    const get = (path: string, headers: Record<string, string>) =>
      fetchJson(`http://127.0.0.1:${port}${path}`, { headers });
    const html = { Accept: "text/html", Authorization: "let me in" };
    try {
      const teapot = await get("/teapot", html);
      expect([teapot.status, teapot.text, teapot.headers.get("content-type")]).toEqual([
        418,
        "<h1>418</h1>",
        "text/html",
      ]);
      expect(teapot.headers.get("retry-after")).toBe("5");
      const refused = await get("/teapot", { Accept: "text/html" });
      expect([refused.status, refused.text, refused.headers.get("www-authenticate")]).toEqual([
        401,
        "<h1>401</h1>",
        "Basic",
      ]);
      expect((await get("/nowhere", html)).text).toBe("<h1>404</h1>");
      // An unmapped error's page is made for a 500, never with its message.
      expect(await get("/bug", html)).toMatchObject({ status: 500, text: "<h1>500</h1>" });
      expect(seen).toContain("500 Internal server error");
      // No page: the JSON, as before; a page that cannot be made: the JSON too.
      const json = await get("/teapot", { Authorization: "let me in" });
      expect(JSON.parse(json.text)).toEqual({ error: "I am a teapot", hint: "kettle" });
      expect(await get("/odd", html)).toMatchObject({ status: 409, text: JSON.stringify({ error: "odd" }) });
    } finally {
      await closeServer(server);
    }
  });

  it("closeServer resolves promptly with an idle keep-alive connection open", async () => {
    const router = new Router().get("/ok", () => ({ json: { ok: true } }));
    const server = createServer(createRequestListener(router, { logger: silentLogger }));
    const port = await listen(server, 0);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const { status, headers } = await new Promise<{ status: number; headers: IncomingHttpHeaders }>(
        (resolve, reject) => {
          const req = request({ host: "127.0.0.1", port, path: "/ok", agent }, (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
          });
          req.on("error", reject);
          req.end();
        },
      );
      expect(status).toBe(200);
      expect(headers.connection).toBe("keep-alive");
      // The socket is now idle in the agent's pool, still connected to the server.
      const connections = await new Promise<number>((resolve, reject) =>
        server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      );
      expect(connections).toBe(1);

      const started = Date.now();
      await closeServer(server);
      // Well under the 2 s force-close fallback: idle connections are ended immediately.
      expect(Date.now() - started).toBeLessThan(1_500);
      expect(server.listening).toBe(false);
    } finally {
      agent.destroy();
    }
  });

  it("closeServer still resolves when a request never gets an answer", async () => {
    const router = new Router().get("/hang", () => new Promise<undefined>(() => {}));
    const server = createServer(createRequestListener(router, { logger: silentLogger }));
    const port = await listen(server, 0);
    const requestFailed = new Promise<string>((resolve) => {
      const req = request({ host: "127.0.0.1", port, path: "/hang" }, () => resolve("answered"));
      req.on("error", (error) => resolve(error.message));
      req.end();
    });
    // Wait until the server has the connection.
    await vi.waitFor(async () => {
      const count = await new Promise<number>((resolve) => server.getConnections((_e, n) => resolve(n)));
      expect(count).toBeGreaterThan(0);
    });
    const started = Date.now();
    await closeServer(server);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await requestFailed).toMatch(/socket hang up|ECONNRESET/);
  });
});
