import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ConfigError, mcpServerSchema, parseTomlConfig } from "@stavrobot/common";
import { loadConfig } from "./config.js";
import { writeMcpServersFile } from "./mcp-servers.js";
import { resolvePaths } from "./paths.js";

const MINIMAL = 'model = "claude-sonnet-4-5"\npassword = "correct-horse"\n';
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "stavrobot-mcp-config-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function writeConfig(text: string): string {
  const path = join(dir, "config.toml");
  writeFileSync(path, MINIMAL + text);
  return path;
}

function load(text: string) {
  return loadConfig(writeConfig(text));
}

function loadError(text: string): string {
  try {
    load(text);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("the config loaded");
}

describe("[mcpServers] in config.toml", () => {
  it("reads stdio and remote servers with their defaults", () => {
    const config = load(
      '[mcpServers.memory]\ncommand = "npx"\nargs = ["-y", "@modelcontextprotocol/server-memory"]\n' +
        '[mcpServers.memory.env]\nMEMORY_FILE_PATH = "/srv/memory.json"\n' +
        '[mcpServers.docs]\nurl = "https://mcp.example.com/mcp"\ntimeoutSeconds = 20\n' +
        '[mcpServers.docs.headers]\nAuthorization = "Bearer abc"\n',
    );
    expect(config.mcpServers?.memory).toEqual({
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-memory"],
      env: { MEMORY_FILE_PATH: "/srv/memory.json" },
      headers: {},
      network: true,
      timeoutSeconds: 60,
      enabled: true,
    });
    expect(config.mcpServers?.docs).toMatchObject({ url: "https://mcp.example.com/mcp", timeoutSeconds: 20 });
  });

  it("an unknown key of a server is refused, naming it and the server", () => {
    const message = loadError('[mcpServers.memory]\ncommand = "npx"\ntimeout = 5\n');
    expect(message).toContain(
      'key "mcpServers.memory.timeout" is not a setting in [mcpServers.memory]: did you mean "timeoutSeconds"?',
    );
  });

  it.each([
    ['[mcpServers.x]\nargs = ["a"]\n', "set either command"],
    ['[mcpServers.x]\ncommand = "a"\nurl = "https://a.example.com"\n', "set either command"],
    ['[mcpServers.x]\nurl = "https://a.example.com"\nargs = ["a"]\n', "only for a stdio server"],
    ['[mcpServers.x]\ncommand = "a"\n[mcpServers.x.headers]\nA = "b"\n', "only for a remote server"],
    ['[mcpServers.x]\nurl = "https://a.example.com"\nnetwork = false\n', "reached over the network"],
    ['[mcpServers.x]\ncommand = "a"\ntimeoutSeconds = 600\n', "at most 80"],
    ['[mcpServers.Bad_Name]\ncommand = "a"\n', "lowercase letters"],
    ['[mcpServers.x]\nurl = "ftp://a.example.com"\n', "http:// or https://"],
  ])("refuses %s", (text, expected) => {
    expect(loadError(text)).toContain(expected);
  });

  it("the error names the key, never an env or header value", () => {
    const message = loadError(
      '[mcpServers.x]\ncommand = "a"\n[mcpServers.x.env]\n"BAD NAME" = "hunter2-secret"\n',
    );
    expect(message).toContain("environment variable name");
    expect(message).not.toContain("hunter2-secret");
  });
});

describe("config.example.toml documents every key of a server", () => {
  it("the commented examples, switched on, use every key and load", () => {
    const path = fileURLToPath(new URL("../../../config.example.toml", import.meta.url));
    const text = readFileSync(path, "utf8")
      .split("\n")
      .map((line) =>
        /^#\s?(\[[A-Za-z.]+\]|[A-Za-z]\w*\s*=.*)$/.test(line) ? line.replace(/^#\s?/, "") : line,
      )
      .join("\n");
    const parsed = parseTomlConfig(text, z.record(z.string(), z.unknown()), path);
    const servers = parsed.mcpServers as Record<string, Record<string, unknown>>;
    const used = new Set(Object.values(servers).flatMap((server) => Object.keys(server)));
    expect([...used].sort()).toEqual(Object.keys(mcpServerSchema.shape).sort());
    expect(() => loadConfig(writeConfig(`[mcpServers.memory]\ncommand = "npx"\n`))).not.toThrow();
  });
});

describe("the declarations handed to the plugin-runner", () => {
  const withServer = '[mcpServers.memory]\ncommand = "npx"\n[mcpServers.memory.env]\nTOKEN = "t0ken"\n';

  it("writes them beside the internal secret by default, owner-only, and removes the file when none are left", async () => {
    const paths = resolvePaths({
      DATA_DIR: dir,
      STAVROBOT_INTERNAL_SECRET_FILE: join(dir, "internal-secret"),
    });
    const config = load(withServer);
    await writeMcpServersFile(paths, config);
    const file = join(dir, "mcp-servers.json");
    expect(paths.mcpServersFile).toBe(file);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ memory: config.mcpServers?.memory });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    await writeMcpServersFile(paths, load(""));
    expect(existsSync(file)).toBe(false);
  });

  it("writes them to MCP_SERVERS_FILE, and removes the copy an older version left beside the secret", async () => {
    // Compose: the secret's directory is mounted into every sibling, the MCP one only into the plugin-runner.
    const secrets = join(dir, "secrets");
    mkdirSync(secrets);
    writeFileSync(join(secrets, "internal-secret"), "a-secret-of-sixteen-or-more\n");
    writeFileSync(join(secrets, "mcp-servers.json"), '{"memory":{"env":{"TOKEN":"old"}}}\n');
    const paths = resolvePaths({
      DATA_DIR: dir,
      STAVROBOT_INTERNAL_SECRET_FILE: join(secrets, "internal-secret"),
      MCP_SERVERS_FILE: join(dir, "mcp", "mcp-servers.json"),
    });
    const config = load(withServer);
    await writeMcpServersFile(paths, config);
    expect(readdirSync(secrets)).toEqual(["internal-secret"]);
    expect(JSON.parse(readFileSync(join(dir, "mcp", "mcp-servers.json"), "utf8"))).toEqual({
      memory: config.mcpServers?.memory,
    });
    expect(statSync(join(dir, "mcp")).mode & 0o777).toBe(0o700);
  });
});
