import { readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { MCP_SERVERS_FILE, writeFileAtomic } from "@stavrobot/common";
import type { AppConfig } from "./config.js";

/**
 * Hands the owner's `[mcpServers]` to the plugin-runner: the runner never reads config.toml (it
 * holds the owner's password and keys), so the app writes exactly the checked declarations, and
 * nothing else, to `mcp-servers.json` beside the internal secret, which the runner already reads
 * (the same directory in the container and with `npm start`), readable by the owner only. The
 * runner reads it again whenever it changes. Without servers there is no file.
 */
export async function writeMcpServersFile(secretFile: string, config: Readonly<AppConfig>): Promise<void> {
  const path = join(dirname(secretFile), MCP_SERVERS_FILE);
  const servers = config.mcpServers ?? {};
  if (Object.keys(servers).length === 0) {
    await rm(path, { force: true });
    return;
  }
  const text = JSON.stringify(servers, null, 2) + "\n";
  if ((await readFile(path, "utf8").catch(() => undefined)) === text) return;
  await writeFileAtomic(path, text, undefined, 0o600);
}
