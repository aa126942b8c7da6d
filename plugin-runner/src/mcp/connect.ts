import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { errorMessage } from "@stavrobot/common";
import type { McpServerDeclaration } from "@stavrobot/common";

/** How the runner names itself to MCP servers. */
export const CLIENT_INFO = { name: "stavrobot-plugin-runner", version: "0.1.0" };

export function newClient(): Client {
  return new Client(CLIENT_INFO, { capabilities: {} });
}

/**
 * A remote server's client, connected. `type = "http"` (or `"streamable-http"`) is Streamable HTTP
 * only and `"sse"` the older HTTP+SSE only, as the owner said; without a type, Streamable HTTP
 * first and, when the server refuses it (an older server answers the POST with 4xx), HTTP+SSE.
 * The headers go with every request of either and are never shown.
 */
export async function connectRemote(
  declaration: McpServerDeclaration,
  timeoutMs: number,
): Promise<{ client: Client; transport: "streamable-http" | "sse" }> {
  const url = new URL(declaration.url as string);
  const requestInit = { headers: declaration.headers };
  const attempt = async (transport: "streamable-http" | "sse") => {
    const client = newClient();
    try {
      await client.connect(
        transport === "sse"
          ? new SSEClientTransport(url, { requestInit })
          : new StreamableHTTPClientTransport(url, { requestInit }),
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
