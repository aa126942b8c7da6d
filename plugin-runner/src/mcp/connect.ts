import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import type { ElicitRequestFormParams, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { basename } from "node:path";
import { pathToFileURL } from "node:url";
import { errorMessage } from "@stavrobot/common";
import type { McpServerDeclaration } from "@stavrobot/common";

/** How the runner names itself to MCP servers. */
export const CLIENT_INFO = { name: "stavrobot-plugin-runner", version: "0.1.0" };

/** Puts a server's question (a form: elicitation.ts) to the owner; `signal` aborts when the server withdraws it. */
export type AskOwner = (params: ElicitRequestFormParams, signal: AbortSignal) => Promise<ElicitResult>;

/**
 * A client that declares `roots` and answers `roots/list` with `roots()` (read at each request) as
 * file:// URIs: for a stdio server the paths its declaration gave it (named-paths.ts), for a
 * remote one none (nothing of this machine is its to reach). With `ask` it also declares form
 * elicitation and puts a server's questions to the owner.
 */
export function newClient(roots: () => readonly string[] = () => [], ask?: AskOwner): Client {
  const client = new Client(CLIENT_INFO, {
    capabilities: { roots: {}, ...(ask ? { elicitation: { form: {} } } : {}) },
  });
  client.setRequestHandler(ListRootsRequestSchema, () => ({
    roots: roots().map((path) => ({ uri: pathToFileURL(path).href, name: basename(path) || path })),
  }));
  // The SDK checks the request (form mode only, as declared) and the result's shape around this.
  if (ask)
    client.setRequestHandler(ElicitRequestSchema, (request, extra) =>
      ask(request.params as ElicitRequestFormParams, extra.signal),
    );
  return client;
}

/**
 * A remote server's client, connected. `type = "http"` (or `"streamable-http"`) is Streamable HTTP
 * only and `"sse"` the older HTTP+SSE only, as the owner said; without a type, Streamable HTTP
 * first and, when the server refuses it (an older server answers the POST with 4xx), HTTP+SSE.
 * The headers go with every request of either and are never shown; `authProvider` (oauth.ts) gives
 * the OAuth token of a server the owner signed in to.
 */
export async function connectRemote(
  declaration: McpServerDeclaration,
  timeoutMs: number,
  ask?: AskOwner,
  authProvider?: OAuthClientProvider,
): Promise<{ client: Client; transport: "streamable-http" | "sse" }> {
  const url = new URL(declaration.url as string);
  const requestInit = { headers: declaration.headers };
  const options = { requestInit, ...(authProvider ? { authProvider } : {}) };
  const attempt = async (transport: "streamable-http" | "sse") => {
    const client = newClient(undefined, ask);
    try {
      await client.connect(
        transport === "sse"
          ? new SSEClientTransport(url, options)
          : new StreamableHTTPClientTransport(url, options),
        { timeout: timeoutMs },
      );
      return { client, transport };
    } catch (error) {
      await client.close().catch(() => {});
      throw error;
    }
  };
  if (declaration.type === "sse") return attempt("sse");
  if (declaration.type === "http" || declaration.type === "streamable-http")
    return attempt("streamable-http");
  try {
    return await attempt("streamable-http");
  } catch (first) {
    try {
      return await attempt("sse");
    } catch (second) {
      throw new Error(
        `neither Streamable HTTP (${errorMessage(first)}) nor HTTP+SSE (${errorMessage(second)}) worked`,
      );
    }
  }
}
