import { describe, expect, it } from "vitest";
import { parseConfig } from "./config.js";
import { declaredServers, planImport, withImported } from "./mcp-import.js";

const MINIMAL =
  '# my settings\nmodel = "claude-sonnet-4-5"\npassword = "correct-horse"\n\n[queue]\nmaxRetries = 1\n';

/** Claude Desktop's file as its documentation shows it, plus what other hosts add. */
const CLAUDE_DESKTOP = {
  mcpServers: {
    memory: { command: "npx", args: ["-y", "@modelcontextprotocol/server-memory"] },
    filesystem: {
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
      env: { LOG_LEVEL: "debug" },
    },
    my_github: {
      type: "http",
      url: "https://api.example.com/mcp/",
      headers: { Authorization: "Bearer ${GITHUB_TOKEN}" },
    },
    legacy: { type: "sse", url: "https://old.example.com/sse", disabled: true },
    windows: { command: "cmd", args: ["/c", "npx", "-y", "some-server"], autoApprove: ["read"] },
    "bad name": { command: "x" },
    oauthy: { url: "https://x.example.com/mcp", oauth: { clientId: "abc" } },
    websocket: { type: "ws", url: "wss://x.example.com" },
    neither: { args: ["a"] },
  },
};

describe("npm run mcp:import: another assistant's MCP servers as config.toml tables", () => {
  it("maps command, args, env, type, url, headers and disabled; refuses what it cannot map, with the reason, and keeps going", () => {
    const plan = planImport(CLAUDE_DESKTOP, new Set(), false);
    expect(plan.imported.map((server) => server.name)).toEqual([
      "memory",
      "filesystem",
      "my_github",
      "legacy",
      "windows",
    ]);
    expect(plan.imported[0]?.toml).toBe(
      '[mcpServers.memory]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-memory"]\n',
    );
    expect(plan.imported[2]?.toml).toBe(
      '[mcpServers.my_github]\ntype = "http"\nurl = "https://api.example.com/mcp/"\n' +
        '[mcpServers.my_github.headers]\nAuthorization = "Bearer ${GITHUB_TOKEN}"\n',
    );
    expect(plan.imported[3]?.toml).toContain("enabled = false");
    expect(plan.imported[4]?.toml).toContain('command = "npx"\nargs = ["-y", "some-server"]');
    expect(plan.imported[4]?.notes).toEqual([
      expect.stringContaining('"autoApprove" left out'),
      expect.stringContaining('"cmd /c" (Windows\' shell) left out: npx runs directly'),
    ]);
    expect(Object.fromEntries(plan.refused.map(({ name, reason }) => [name, reason]))).toEqual({
      "bad name": expect.stringContaining("letters, digits, hyphens and underscores"),
      oauthy: '"oauth" has no equivalent here',
      websocket: '"type" "ws" is not a transport this assistant speaks',
      neither: expect.stringContaining("set either command"),
    });
  });

  it("a server config.toml declares already is refused, unless --replace", () => {
    const text = `${MINIMAL}[mcpServers.memory]\ncommand = "old"\n[mcpServers.memory.env]\nA = "b"\n\n[mcpServers.other]\ncommand = "keep"\n`;
    const declared = new Set(declaredServers(text).keys());
    const refused = planImport({ mcpServers: { memory: { command: "new" } } }, declared, false);
    expect(refused.refused).toEqual([
      {
        name: "memory",
        reason: 'config.toml declares "memory" already: run again with --replace to replace it',
      },
    ]);
    const replaced = planImport({ mcpServers: { memory: { command: "new" } } }, declared, true);
    const next = withImported(text, replaced.imported, "claude_desktop_config.json");
    const config = parseConfig(next, "config.toml");
    expect(config.mcpServers?.memory).toMatchObject({ command: "new", env: {} });
    expect(config.mcpServers?.other).toMatchObject({ command: "keep" });
    // Everything else as it was: comments, keys and their order.
    expect(next.startsWith(MINIMAL)).toBe(true);
    expect(next).toContain("# Imported from claude_desktop_config.json by npm run mcp:import.");
  });

  it("the written text is a config the app reads, the imported servers under their plugin names", () => {
    const plan = planImport(CLAUDE_DESKTOP, new Set(), false);
    const config = parseConfig(withImported(MINIMAL, plan.imported, ".mcp.json"), "config.toml", {
      env: { GITHUB_TOKEN: "ghp_example" },
      missing: "refuse",
    });
    expect(Object.keys(config.mcpServers ?? {})).toEqual([
      "memory",
      "filesystem",
      "my-github",
      "legacy",
      "windows",
    ]);
    expect(config.mcpServers?.["my-github"]?.headers).toEqual({ Authorization: "Bearer ghp_example" });
    expect(config.queue).toMatchObject({ maxRetries: 1 });
  });

  it('a file without servers is refused whole; VS Code\'s "servers" is read too', () => {
    expect(() => planImport({ something: {} }, new Set(), false)).toThrow(/no "mcpServers"/);
    expect(
      planImport({ servers: { a: { type: "stdio", command: "x" } } }, new Set(), false).imported,
    ).toHaveLength(1);
  });
});
