import { chmodSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { buildFixtureServer } from "./fixture-server.js";

const here = fileURLToPath(new URL(".", import.meta.url));

/**
 * A stdio fixture server (the first, the features or the asking server) as one file in `dir` (readable by plugin users): the sandbox shows a
 * server only the paths its command line names, so it cannot reach this repository's node_modules.
 */
export async function bundleFixtureServer(
  dir: string,
  server: "fixture" | "features" | "asking" = "fixture",
): Promise<string> {
  const out = join(dir, `${server}-mcp-server.mjs`);
  await build({
    entryPoints: [join(here, server === "fixture" ? "main.ts" : `${server}-main.ts`)],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: out,
    conditions: ["source"],
    logLevel: "silent",
  });
  chmodSync(out, 0o644);
  return out;
}

export interface FixtureHttpServer {
  url: string;
  /** Every request's Authorization header. */
  authorizations: (string | undefined)[];
  close(): Promise<void>;
}

/**
 * The fixture served over Streamable HTTP (stateless: a server and transport per request) on a
 * loopback port; requests without `Authorization: Bearer <token>` are refused with 401.
 */
export async function startFixtureHttpServer(token: string): Promise<FixtureHttpServer> {
  const authorizations: (string | undefined)[] = [];
  const server: Server = createServer(async (req, res) => {
    authorizations.push(req.headers.authorization);
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}');
      return;
    }
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const mcp = buildFixtureServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => void transport.close().then(() => mcp.close()));
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
  );
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    authorizations,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/**
 * The fixture as an older server that speaks only HTTP+SSE: `GET /sse` opens the event stream,
 * messages are posted to `/messages?sessionId=…`, and a POST to `/sse` (how Streamable HTTP starts)
 * is refused with 405, as such servers do. Requests need `Authorization: Bearer <token>` too.
 */
export async function startFixtureSseServer(token: string): Promise<FixtureHttpServer> {
  const authorizations: (string | undefined)[] = [];
  const sessions = new Map<string, SSEServerTransport>();
  const server: Server = createServer(async (req, res) => {
    authorizations.push(req.headers.authorization);
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401).end();
      return;
    }
    const url = new URL(req.url ?? "/", "http://localhost");
    if (req.method === "GET" && url.pathname === "/sse") {
      const transport = new SSEServerTransport("/messages", res);
      sessions.set(transport.sessionId, transport);
      res.on("close", () => sessions.delete(transport.sessionId));
      await buildFixtureServer().connect(transport);
      return;
    }
    const transport = sessions.get(url.searchParams.get("sessionId") ?? "");
    if (req.method === "POST" && url.pathname === "/messages" && transport) {
      await transport.handlePostMessage(req, res);
      return;
    }
    res.writeHead(405).end();
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
  );
  return {
    url: `http://127.0.0.1:${port}/sse`,
    authorizations,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
