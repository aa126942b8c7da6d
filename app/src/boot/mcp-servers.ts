import { mkdir, readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { MCP_SERVERS_FILE, writeFileAtomic } from "@stavrobot/common";
import type { AppConfig } from "./config.js";
import type { AppPaths } from "./paths.js";

/**
 * Hands the owner's `[mcpServers]` to the plugin-runner: the runner never reads config.toml (it
 * holds the owner's password and keys), so the app writes exactly the checked declarations, and
 * nothing else, to `paths.mcpServersFile` (MCP_SERVERS_FILE; by default `mcp-servers.json` beside
 * the internal secret, where `npm start`'s runner looks), readable by the owner only. The runner
 * reads it again whenever it changes. Without servers there is no file. Compose keeps it in a
 * directory of its own that only the plugin-runner mounts, so the services that mount the
 * secret's directory cannot read the servers' tokens: a file an older version wrote beside the
 * secret is removed.
 */
export async function writeMcpServersFile(
  paths: Pick<AppPaths, "secretFile" | "mcpServersFile">,
  config: Readonly<AppConfig>,
): Promise<void> {
  const path = paths.mcpServersFile;
  const besideSecret = join(dirname(paths.secretFile), MCP_SERVERS_FILE);
  if (besideSecret !== path) await rm(besideSecret, { force: true });
  const servers = config.mcpServers ?? {};
  if (Object.keys(servers).length === 0) {
    await rm(path, { force: true });
    return;
  }
  const text = JSON.stringify(servers, null, 2) + "\n";
  if ((await readFile(path, "utf8").catch(() => undefined)) === text) return;
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFileAtomic(path, text, undefined, 0o600);
}
