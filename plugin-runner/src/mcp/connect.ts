import { lstat } from "node:fs/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { isSystemPath, errorMessage } from "@stavrobot/common";
import type { McpServerDeclaration, Mount } from "@stavrobot/common";

/** How the runner names itself to MCP servers. */
export const CLIENT_INFO = { name: "stavrobot-plugin-runner", version: "0.1.0" };

export function newClient(): Client {
  return new Client(CLIENT_INFO, { capabilities: {} });
}

/**
 * Read-only mounts for the absolute paths a stdio server's `command`, `args` and `env` values name
 * (`/srv/notes`, `--root=/srv/notes`): real servers are given their files that way, and a sandbox
 * that hid them would leave the server unable to start. Only paths that exist; system directories
 * are there already. Nothing else of the machine is shown.
 */
export async function namedPathMounts(declaration: McpServerDeclaration): Promise<Mount[]> {
  const tokens = [declaration.command ?? "", ...declaration.args, ...Object.values(declaration.env)];
  const paths = new Set<string>();
  for (const token of tokens) {
    for (const candidate of [token, token.slice(token.indexOf("=") + 1)]) {
      if (candidate.startsWith("/") && !candidate.includes("\0"))
        paths.add(candidate.replace(/\/+$/, "") || "/");
    }
  }
  const mounts: Mount[] = [];
  for (const path of [...paths].sort()) {
    if (path === "/" || isSystemPath(path) || /^\/(proc|dev|sys)(\/|$)/.test(path)) continue;
    if (!(await lstat(path).catch(() => undefined))) continue;
    mounts.push({ source: path, target: path, writable: false });
  }
  return mounts;
}

/**
 * A remote server's client, connected: Streamable HTTP first; when the server refuses that (an
 * older server that only speaks HTTP+SSE answers the POST with 4xx), the older transport. The
 * headers go with every request of either and are never shown.
 */
export async function connectRemote(
  declaration: McpServerDeclaration,
  timeoutMs: number,
): Promise<{ client: Client; transport: "streamable-http" | "sse" }> {
  const url = new URL(declaration.url as string);
  const requestInit = { headers: declaration.headers };
  const client = newClient();
  try {
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit }), { timeout: timeoutMs });
    return { client, transport: "streamable-http" };
  } catch (first) {
    await client.close().catch(() => {});
    const fallback = newClient();
    try {
      await fallback.connect(new SSEClientTransport(url, { requestInit }), { timeout: timeoutMs });
      return { client: fallback, transport: "sse" };
    } catch (second) {
      await fallback.close().catch(() => {});
      throw new Error(
        `neither Streamable HTTP (${errorMessage(first)}) nor HTTP+SSE (${errorMessage(second)}) worked`,
      );
    }
  }
}
