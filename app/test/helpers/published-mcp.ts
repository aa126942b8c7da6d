import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The published MCP servers the tests run, at pinned versions (`npm view` to move them). */
export const PUBLISHED_MCP_SERVERS = {
  "@modelcontextprotocol/server-everything": "2026.8.31",
  "@modelcontextprotocol/server-memory": "2026.8.31",
  "@modelcontextprotocol/server-filesystem": "2026.8.31",
} as const;

/**
 * The published servers installed as an owner installs them (`npm install --prefix <dir>`), once
 * per machine and set of versions: a folder of the temp directory named by their hash, which the
 * next test run (the suite runs twice in CI) finds ready. It is there, not in this checkout, so
 * plugin users can reach it in the plain sandbox whatever the checkout's parents allow. Installed
 * into a staging folder renamed into place, so a run that stopped half-way leaves nothing used.
 */
export async function installPublishedMcpServers(): Promise<string> {
  const specs = Object.entries(PUBLISHED_MCP_SERVERS).map(([name, version]) => `${name}@${version}`);
  const hash = createHash("sha256").update(specs.join(" ")).digest("hex").slice(0, 12);
  const dir = join(tmpdir(), `stavrobot-published-mcp-${hash}`);
  if (existsSync(join(dir, "package.json"))) return dir;
  const staging = `${dir}.${process.pid}.tmp`;
  rmSync(staging, { recursive: true, force: true });
  await run(
    "npm",
    ["install", "--prefix", staging, "--no-audit", "--no-fund", "--loglevel=error", ...specs],
    {
      timeout: 300_000,
    },
  );
  // Readable by every plugin user; npm's own umask may have closed some of it.
  await run("chmod", ["-R", "a+rX", staging]);
  try {
    renameSync(staging, dir);
  } catch (error) {
    // Another test file installed it meanwhile.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(join(dir, "package.json"))) throw error;
  }
  return dir;
}
