import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "@stavrobot/common";
import { loadConfig, parseConfig } from "./config.js";
import { expandMcpVariables } from "./mcp-variables.js";

const MINIMAL = 'model = "claude-sonnet-4-5"\npassword = "correct-horse"\n';
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "stavrobot-mcp-vars-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function write(text: string): string {
  const path = join(dir, "config.toml");
  writeFileSync(path, MINIMAL + text);
  return path;
}

describe("${VAR} in [mcpServers]", () => {
  it("expands ${VAR} and ${VAR:-default} in command, args, env, url, headers, cwd, readOnlyPaths and oauth", () => {
    const env = { TOOLS: "/srv/tools", TOKEN: "tok-123", HOST: "mcp.example.com", EMPTY: "" };
    const expanded = expandMcpVariables(
      {
        model: "${TOOLS}",
        mcpServers: {
          local: {
            command: "${TOOLS}/bin/server",
            args: ["--root=${TOOLS}/data", "${MISSING:-fallback}", "${EMPTY:-used}", "$${TOOLS}"],
            env: { TOKEN: "${TOKEN}", PLAIN: "no variable" },
            cwd: "${TOOLS}",
            readOnlyPaths: ["${TOOLS}/docs"],
          },
          remote: { url: "https://${HOST}/mcp", headers: { Authorization: "Bearer ${TOKEN}" } },
          signedIn: { url: "https://${HOST}/mcp", oauth: { clientId: "me", clientSecret: "${TOKEN}" } },
        },
      },
      env,
    );
    expect(expanded).toEqual({
      value: {
        // Only [mcpServers] is expanded.
        model: "${TOOLS}",
        mcpServers: {
          local: {
            command: "/srv/tools/bin/server",
            args: ["--root=/srv/tools/data", "fallback", "used", "${TOOLS}"],
            env: { TOKEN: "tok-123", PLAIN: "no variable" },
            cwd: "/srv/tools",
            readOnlyPaths: ["/srv/tools/docs"],
          },
          remote: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer tok-123" } },
          signedIn: {
            url: "https://mcp.example.com/mcp",
            oauth: { clientId: "me", clientSecret: "tok-123" },
          },
        },
      },
    });
  });

  it("a variable the app's environment lacks stops the start, naming server, key and variable (never a default)", () => {
    const path = write(
      '[mcpServers.github]\ncommand = "npx"\n[mcpServers.github.env]\nGITHUB_TOKEN = "${GITHUB_TOKEN}"\n' +
        '[mcpServers.docs]\nurl = "${DOCS_URL}"\n',
    );
    let error: unknown;
    try {
      loadConfig(path, {});
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain(`Invalid config in ${path}`);
    expect(message).toContain(
      'key "mcpServers.github.env.GITHUB_TOKEN" uses ${GITHUB_TOKEN}, but GITHUB_TOKEN is not set in the app\'s environment',
    );
    expect(message).toContain('key "mcpServers.docs.url" uses ${DOCS_URL}');
  });

  it("the app's environment gives the values; the config it holds has them", () => {
    const path = write(
      '[mcpServers.docs]\nurl = "${DOCS_URL}"\n[mcpServers.docs.headers]\nAuthorization = "Bearer ${DOCS_KEY:-none}"\n',
    );
    const config = loadConfig(path, { DOCS_URL: "https://docs.example.com/mcp" });
    expect(config.mcpServers?.docs).toMatchObject({
      url: "https://docs.example.com/mcp",
      headers: { Authorization: "Bearer none" },
    });
  });

  it("where config.toml is written for the next start, a missing variable has a stand-in and the rest is checked", () => {
    const text =
      MINIMAL + '[mcpServers.docs]\nurl = "${DOCS_URL}"\n[mcpServers.x]\ncommand = "${X}"\nfoo = 1\n';
    expect(() => parseConfig(text, "config.toml", { env: {} })).toThrow(
      /"mcpServers.x.foo" is not a setting/,
    );
    const fine = MINIMAL + '[mcpServers.docs]\nurl = "${DOCS_URL}/mcp"\n';
    expect(parseConfig(fine, "config.toml", { env: {} }).mcpServers?.docs?.url).toBe(
      "http://variable.invalid/mcp",
    );
  });
});
