import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ConfigError, mcpServerSchema, parseTomlConfig, silentLogger } from "@stavrobot/common";
import { loadConfig } from "./config.js";
import { McpConfigWatch, writeMcpServersFile } from "./mcp-servers.js";
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
      readOnly: false,
      readOnlyPaths: [],
      network: true,
      timeoutSeconds: 60,
      startTimeoutSeconds: 120,
      questionTimeoutSeconds: 300,
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
    ['[mcpServers."bad name"]\ncommand = "a"\n', "letters, digits, hyphens and underscores"],
    [
      '[mcpServers.my_server]\ncommand = "a"\n[mcpServers.my-server]\ncommand = "b"\n',
      'both the plugin "my-server"',
    ],
    ['[mcpServers.x]\ntype = "stdio"\nurl = "https://a.example.com"\n', 'type = "stdio" needs command'],
    ['[mcpServers.x]\ntype = "http"\ncommand = "a"\n', 'type = "http" needs url'],
    ['[mcpServers.x]\ntype = "websocket"\ncommand = "a"\n', '"stdio", "http", "streamable-http", "sse"'],
    ['[mcpServers.x]\ncommand = "a"\ncwd = "relative/dir"\n', "must be an absolute path"],
    ['[mcpServers.x]\nurl = "https://a.example.com"\ncwd = "/srv"\n', "only for a stdio server"],
    ['[mcpServers.x]\ncommand = "a"\nreadOnlyPaths = ["docs"]\n', "must be an absolute path"],
    ['[mcpServers.x]\ncommand = "a"\nstartTimeoutSeconds = 900\n', "600 or less"],
    ['[mcpServers.x]\ncommand = "a"\nquestionTimeoutSeconds = 1000\n', "900 or less"],
    ['[mcpServers.x]\ncommand = "a"\nquestionTimeoutSeconds = 0\n', "questionTimeoutSeconds"],
    ['[mcpServers.x]\nurl = "ftp://a.example.com"\n', "http:// or https://"],
    ['[mcpServers.x]\ncommand = "a"\n[mcpServers.x.oauth]\nclientId = "b"\n', "only for a remote server"],
    [
      '[mcpServers.x]\nurl = "https://a.example.com"\n[mcpServers.x.oauth]\nclientSecret = "s"\n',
      "needs oauth.clientId",
    ],
    ['[mcpServers.x]\nurl = "https://a.example.com"\n[mcpServers.x.oauth]\nclient_id = "b"\n', "client_id"],
    [
      '[mcpServers.x]\nurl = "https://a.example.com"\nheaders = { Authorization = "Bearer t" }\n[mcpServers.x.oauth]\n',
      "not with an Authorization header",
    ],
  ])("refuses %s", (text, expected) => {
    expect(loadError(text)).toContain(expected);
  });

  it("takes the shapes other assistants' configs use: type, cwd, a name with underscores or capitals", () => {
    const config = load(
      '[mcpServers.my_server]\ntype = "stdio"\ncommand = "node"\ncwd = "/srv/app"\n' +
        '[mcpServers.GitHub]\ntype = "http"\nurl = "https://api.example.com/mcp"\n' +
        '[mcpServers.old-one]\ntype = "sse"\nurl = "https://old.example.com/sse"\n' +
        '[mcpServers.streamy]\ntype = "streamable-http"\nurl = "https://new.example.com/mcp"\n',
    );
    // By the plugin names they become (the model's, the Plugins page's, their Unix users').
    expect(Object.keys(config.mcpServers ?? {})).toEqual(["my-server", "github", "old-one", "streamy"]);
    expect(config.mcpServers?.["my-server"]).toMatchObject({
      type: "stdio",
      command: "node",
      cwd: "/srv/app",
    });
    expect(config.mcpServers?.github).toMatchObject({ type: "http", url: "https://api.example.com/mcp" });
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

describe("config.toml changed while the app runs", () => {
  it("writes the new declarations for the runner; a bad edit keeps the last good ones and says why", async () => {
    const secret = join(dir, "internal-secret");
    const file = join(dir, "mcp-servers.json");
    const path = writeConfig('[mcpServers.memory]\ncommand = "npx"\n');
    const logged: string[] = [];
    let changes = 0;
    const watch = new McpConfigWatch({
      configPath: path,
      paths: { secretFile: secret, mcpServersFile: join(dir, "mcp-servers.json") },
      env: { TOKEN: "from-the-env" },
      logger: {
        ...silentLogger,
        error: (message, fields) => void logged.push(`${message} ${JSON.stringify(fields)}`),
      },
      changed: () => void changes++,
    });
    await watch.reread();
    expect(Object.keys(JSON.parse(readFileSync(file, "utf8")) as object)).toEqual(["memory"]);
    expect(changes).toBe(1);

    writeConfig('[mcpServers.memory]\ncommand = "npx"\n[mcpServers.my_docs]\ncommand = "${TOKEN}"\n');
    await watch.reread();
    const written = JSON.parse(readFileSync(file, "utf8")) as Record<string, { command: string }>;
    expect(Object.keys(written)).toEqual(["memory", "my-docs"]);
    expect(written["my-docs"]?.command).toBe("from-the-env");
    expect(changes).toBe(2);
    // The same again changes nothing.
    await watch.reread();
    expect(changes).toBe(2);

    const good = readFileSync(file, "utf8");
    writeConfig('[mcpServers.memory]\ncommand = "npx"\n[mcpServers.memory.env]\nKEY = "${NOT_SET}"\n');
    await watch.reread();
    expect(readFileSync(file, "utf8")).toBe(good);
    expect(watch.problem).toContain("NOT_SET is not set in the app's environment");
    expect(watch.problem).toContain("the MCP servers of the last good version keep running");
    expect(logged.join("\n")).toContain('key \\"mcpServers.memory.env.KEY\\" uses ${NOT_SET}');
    writeConfig("this is = = not toml");
    await watch.reread();
    expect(watch.problem).toContain("Invalid TOML");
    expect(readFileSync(file, "utf8")).toBe(good);

    writeConfig("");
    await watch.reread();
    expect(watch.problem).toBeUndefined();
    expect(existsSync(file)).toBe(false);
  });

  it("notices a change by itself (the file replaced, as editors and the Settings page do)", async () => {
    const secret = join(dir, "internal-secret");
    const path = writeConfig("");
    const watch = new McpConfigWatch({
      configPath: path,
      paths: { secretFile: secret, mcpServersFile: join(dir, "mcp-servers.json") },
      env: {},
      logger: silentLogger,
      changed: () => {},
      intervalMs: 50,
    });
    watch.start();
    try {
      const next = join(dir, "next.toml");
      writeFileSync(next, MINIMAL + '[mcpServers.memory]\ncommand = "npx"\n');
      renameSync(next, path);
      await vi.waitFor(() => expect(existsSync(join(dir, "mcp-servers.json"))).toBe(true), {
        timeout: 5_000,
      });
    } finally {
      watch.stop();
    }
  });
});
