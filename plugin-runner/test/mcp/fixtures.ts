import { chmodSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { buildFixtureServer } from "./fixture-server.js";

const here = fileURLToPath(new URL(".", import.meta.url));

/**
 * The stdio fixture server as one file in `dir` (readable by plugin users): the sandbox shows a
 * server only the paths its command line names, so it cannot reach this repository's node_modules.
 */
export async function bundleFixtureServer(dir: string): Promise<string> {
  const out = join(dir, "fixture-mcp-server.mjs");
  await build({
    entryPoints: [join(here, "main.ts")],
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
