import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bundleFixtureServer } from "./mcp/fixtures.js";
import { makeTempRoot, startPluginHost, uniqueName, type TestPluginHost } from "./helpers.js";

/**
 * MCP stdio servers where the sandbox makes no namespaces: still their own user and HOME,
 * restarted after a crash; one that must have no network is not started, saying why.
 */
const ENV_SECRET = "plain-env-secret-0c44e1";
let root: string;

describe("MCP servers in the plain sandbox (no namespaces)", () => {
  let plain: TestPluginHost;
  const plainServer = uniqueName("mcp-plain");
  const plainOffline = uniqueName("mcp-plain-off");

  beforeAll(async () => {
    root = makeTempRoot("mcp-plain");
    const script = await bundleFixtureServer(root);
    const file = join(root, "mcp-servers-plain.json");
    writeFileSync(
      file,
      JSON.stringify({
        [plainServer]: { command: "node", args: [script], env: { FIXTURE_TOKEN: ENV_SECRET } },
        [plainOffline]: { command: "node", args: [script], network: false },
      }),
    );
    plain = await startPluginHost({
      root: join(root, "plain-host"),
      plainSandbox: true,
      mcpServersFile: file,
    });
  }, 60_000);

  afterAll(async () => {
    await plain?.close();
    for (const name of [plainServer, plainOffline]) await plain?.host.isolation.removeUser(name);
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const runPlain = (plugin: string, tool: string, body: Record<string, unknown> = {}) =>
    plain.request("POST", `/bundles/${plugin}/tools/${encodeURIComponent(tool)}/run`, body);

  it("runs the server as its own user with its own HOME, restarts it after a crash", async () => {
    await vi.waitFor(
      async () =>
        expect((await runPlain(plainServer, "say.hello-world", { name: "Fa" })).body).toEqual({
          success: true,
          output: "Hello, Fa!",
        }),
      { timeout: 30_000 },
    );
    const who = ((await runPlain(plainServer, "whoami")).body as { output: string }).output;
    expect(who).toContain(`${plainServer}`);
    const crashed = (await runPlain(plainServer, "crash")).body as { success: boolean; error: string };
    expect(crashed.success).toBe(false);
    expect(crashed.error).not.toContain(ENV_SECRET);
    await vi.waitFor(
      async () =>
        expect(((await runPlain(plainServer, "whoami")).body as { output: string }).output).not.toBe(who),
      { timeout: 20_000 },
    );
  });

  it("a server that must have no network is not started where the sandbox cannot remove it, and says why", async () => {
    const detail = (await plain.request("GET", `/bundles/${plainOffline}`)).body as {
      server: { state: string; lastError?: string };
    };
    expect(detail.server.state).toBe("failed");
    expect(detail.server.lastError).toContain("cannot remove the network");
  });
});
