import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Logger } from "@stavrobot/common";
import {
  bundleFixtureServer,
  startFixtureHttpServer,
  startFixtureSseServer,
  type FixtureHttpServer,
} from "./mcp/fixtures.js";
import { RED_PIXEL_PNG } from "./mcp/fixture-server.js";
import { namespacesHere } from "@stavrobot/common/test-support";
import {
  isRoot,
  makeTempRoot,
  startPluginHost,
  uniqueName,
  userExists,
  type TestPluginHost,
} from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/**
 * The owner's MCP servers through the runner's routes: our own SDK-built server over stdio (in the
 * sandbox, as its own user) and over Streamable HTTP; every kind of result, progress, a tool list
 * that changes, a crash, a hang, no network, and secrets that never leave.
 */
const ENV_SECRET = "env-secret-value-7f3a9c";
const HEADER_SECRET = "header-secret-value-51be02";
const stdio = uniqueName("mcp-io");
const quick = uniqueName("mcp-quick");
const offline = uniqueName("mcp-off");
const remote = uniqueName("mcp-http");
const badRemote = uniqueName("mcp-bad");
const legacy = uniqueName("mcp-sse");
const sseTyped = uniqueName("mcp-sse-typed");
const httpTyped = uniqueName("mcp-http-typed");

const lines: string[] = [];
function collecting(scope = "runner"): Logger {
  const log =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void =>
      void lines.push(`${level} [${scope}] ${message} ${fields ? JSON.stringify(fields) : ""}`);
  return {
    debug: log("debug"),
    info: log("info"),
    warn: log("warn"),
    error: log("error"),
    child: (s) => collecting(`${scope}:${s}`),
  };
}

let host: TestPluginHost;
let http: FixtureHttpServer;
let sse: FixtureHttpServer;
let listener: Server;
let port: number;
let root: string;
let namedFile: string;

beforeAll(async () => {
  root = makeTempRoot("mcp-servers");
  // In a folder of its own: a script's folder is shown with it.
  mkdirSync(join(root, "server"), { mode: 0o755 });
  const script = await bundleFixtureServer(join(root, "server"));
  namedFile = join(root, "named.txt");
  writeFileSync(namedFile, "the server was given this file", { mode: 0o644 });
  mkdirSync(join(root, "elsewhere"), { mode: 0o755 });
  writeFileSync(join(root, "elsewhere", "unnamed.txt"), "nobody named this file", { mode: 0o644 });
  http = await startFixtureHttpServer(HEADER_SECRET);
  sse = await startFixtureSseServer(HEADER_SECRET);
  listener = createServer((_req, res) => res.end("reached"));
  port = await new Promise<number>((resolve) =>
    listener.listen(0, "127.0.0.1", () => resolve((listener.address() as { port: number }).port)),
  );
  const file = join(root, "mcp-servers.json");
  writeFileSync(
    file,
    JSON.stringify({
      [stdio]: {
        command: "node",
        args: [script, namedFile],
        env: { FIXTURE_TOKEN: ENV_SECRET, FIXTURE_DATA: "~/data.json" },
        timeoutSeconds: 10,
      },
      [quick]: { command: "node", args: [script], env: { FIXTURE_TOKEN: ENV_SECRET }, timeoutSeconds: 1 },
      [offline]: { command: "node", args: [script], network: false },
      [remote]: { url: http.url, headers: { Authorization: `Bearer ${HEADER_SECRET}` } },
      [legacy]: { url: sse.url, headers: { Authorization: `Bearer ${HEADER_SECRET}` } },
      [badRemote]: { url: http.url, headers: { Authorization: "Bearer wrong-token-0000" } },
      [sseTyped]: { type: "sse", url: sse.url, headers: { Authorization: `Bearer ${HEADER_SECRET}` } },
      // The SSE-only server declared as Streamable HTTP: no fall-back, since the owner said which.
      [httpTyped]: { type: "http", url: sse.url, headers: { Authorization: `Bearer ${HEADER_SECRET}` } },
    }),
  );
  host = await startPluginHost({ root: join(root, "host"), mcpServersFile: file, logger: collecting() });
}, 120_000);

afterAll(async () => {
  await host?.close();
  for (const name of [stdio, quick, offline, remote, badRemote, legacy, sseTyped, httpTyped])
    await host?.host.isolation.removeUser(name);
  await http?.close();
  await sse?.close();
  await new Promise((resolve) => listener?.close(resolve));
  if (root) rmSync(root, { recursive: true, force: true });
});

const run = (plugin: string, tool: string, body: Record<string, unknown> = {}) =>
  host.request("POST", `/bundles/${plugin}/tools/${encodeURIComponent(tool)}/run`, body);

function expectNoSecrets(text: string): void {
  expect(text).not.toContain(ENV_SECRET);
  expect(text).not.toContain(HEADER_SECRET);
}

describe("MCP servers as plugins", () => {
  it("lists each server as a plugin with its tools as the server names them, its state, and no secrets", async () => {
    await vi.waitFor(
      async () => {
        const detail = await host.request("GET", `/bundles/${stdio}`);
        expect(detail.status).toBe(200);
        expect((detail.body as { server: { state: string } }).server.state).toBe("running");
      },
      { timeout: 30_000 },
    );
    const list = await host.request("GET", "/bundles");
    const plugins = (list.body as { plugins: { name: string; format: string; server?: unknown }[] }).plugins;
    const mine = plugins.find((plugin) => plugin.name === stdio);
    expect(mine?.format).toBe("mcp");
    const detail = (await host.request("GET", `/bundles/${stdio}`)).body as {
      tools: { name: string; schema?: unknown }[];
      description: string;
      instructions?: string;
    };
    const names = detail.tools.map((tool) => tool.name);
    expect(names).toEqual(
      expect.arrayContaining(["say.hello-world", "draw-pixel", "refuse", "count-slowly"]),
    );
    expect(detail.tools.find((tool) => tool.name === "say.hello-world")?.schema).toMatchObject({
      properties: { name: { type: "string" } },
    });
    // The server's instructions are for the model: they follow its title (never framed as a
    // plugin's instructions for the user).
    expect(detail.description).toBe("MCP server Fixture server. Fixture tools for the runner's tests.");
    expect(detail.instructions).toBeUndefined();
    expectNoSecrets(JSON.stringify(list.body) + JSON.stringify(detail));
    const config = await host.request("GET", `/bundles/${remote}/config`);
    expectNoSecrets(JSON.stringify(config.body));
  });

  it("calls tools: text, an image as a file, structured content and resources, isError as a failure", async () => {
    expect((await run(stdio, "say.hello-world", { name: "Ann" })).body).toEqual({
      success: true,
      output: "Hello, Ann!",
    });
    const image = (await run(stdio, "draw-pixel")).body as {
      success: boolean;
      output: string;
      files: { filename: string; data: string }[];
    };
    expect(image.success).toBe(true);
    expect(image.files).toEqual([{ filename: "draw-pixel-1.png", data: RED_PIXEL_PNG }]);
    expect(image.output).toContain("output file draw-pixel-1.png");
    const structured = (await run(stdio, "structured")).body as {
      output: { content: string; structuredContent: unknown };
    };
    expect(structured.output.content).toContain("[resource file:///weather.txt]\nSunny, 21 C");
    expect(structured.output.structuredContent).toEqual({ temperature: 21, sky: "sunny" });
    expect((await run(stdio, "refuse")).body).toEqual({
      success: false,
      error: "The fixture refuses politely.",
    });
    // Parameters are checked against the server's schema before the server sees them.
    expect((await run(stdio, "say.hello-world", { name: 3 })).status).toBe(400);
  });

  it("logs progress notifications (passed on to the app when a run names its turn)", async () => {
    expect((await run(stdio, "count-slowly")).body).toEqual({ success: true, output: "counted to 3" });
    const progress = lines.filter((line) => line.includes("MCP tool progress") && line.includes(stdio));
    expect(progress.length).toBe(3);
    expect(progress[2]).toContain('"message":"step 3"');
  });

  it("refreshes its tools when the server says the list changed", async () => {
    expect((await run(stdio, "late-tool")).status).toBe(404);
    expect((await run(stdio, "add-tool")).body).toEqual({ success: true, output: "added late-tool" });
    await vi.waitFor(
      async () =>
        expect((await run(stdio, "late-tool")).body).toEqual({ success: true, output: "late tool ran" }),
      {
        timeout: 10_000,
      },
    );
  });

  it("runs in the sandbox: its own HOME, the paths its command line names, nothing else", async () => {
    const who = ((await run(stdio, "whoami")).body as { output: string }).output;
    expect(who).toContain("secret set");
    expect(who).toMatch(new RegExp(`home \\S*${stdio}`));
    // "~/" in an env value (or an argument) is the server's own HOME.
    const home = /home (\S+);/.exec(who)?.[1];
    expect(who).toContain(`data ${home}/data.json`);
    expect((await run(stdio, "read-file", { path: namedFile })).body).toEqual({
      success: true,
      output: "the server was given this file",
    });
    if (namespacesHere()) {
      const other = (await run(stdio, "read-file", { path: join(root, "elsewhere", "unnamed.txt") }))
        .body as {
        success: boolean;
      };
      expect(other.success).toBe(false);
    }
  });

  it("a crash mid-call is an error to the model without the secret; the server is restarted and the next call works", async () => {
    const before = ((await run(stdio, "whoami")).body as { output: string }).output;
    const crashed = (await run(stdio, "crash")).body as { success: boolean; error: string };
    expect(crashed.success).toBe(false);
    expect(crashed.error).toContain("ended while the tool ran");
    expectNoSecrets(crashed.error);
    await vi.waitFor(
      async () => {
        const after = (await run(stdio, "whoami")).body as { success: boolean; output: string };
        expect(after.success).toBe(true);
        expect(after.output).not.toBe(before);
      },
      { timeout: 20_000 },
    );
    // Its stderr (which printed the token) was logged without it.
    expect(lines.some((line) => line.includes("rejected") && line.includes("[secret]"))).toBe(true);
  });

  it("a call past its timeout is cancelled through MCP; a server that still answers is kept", async () => {
    const before = ((await run(quick, "whoami")).body as { output: string }).output;
    const waited = (await run(quick, "wait-forever")).body as { success: boolean; error: string };
    expect(waited).toEqual({
      success: false,
      error: `Tool "wait-forever" of MCP server "${quick}" did not answer within 1 s and was cancelled.`,
    });
    // The server heard notifications/cancelled, and is the same process.
    await vi.waitFor(async () =>
      expect((await run(quick, "cancellations")).body).toEqual({ success: true, output: "cancelled 1" }),
    );
    expect(((await run(quick, "whoami")).body as { output: string }).output).toBe(before);
  });

  it("a call that hangs is cancelled at the timeout, the hung server restarted, and the next call works", async () => {
    const hung = (await run(quick, "hang")).body as { success: boolean; error: string };
    expect(hung.success).toBe(false);
    expect(hung.error).toContain("did not answer within 1 s and was cancelled");
    expect(hung.error).toContain("restarted");
    await vi.waitFor(
      async () =>
        expect((await run(quick, "say.hello-world", { name: "Bo" })).body).toEqual({
          success: true,
          output: "Hello, Bo!",
        }),
      {
        timeout: 20_000,
      },
    );
  });

  it.runIf(namespacesHere())("a server with network = false cannot reach the network", async () => {
    const url = `http://127.0.0.1:${port}/`;
    expect((await run(stdio, "fetch-url", { url })).body).toEqual({
      success: true,
      output: "status 200: reached",
    });
    const refused = (await run(offline, "fetch-url", { url })).body as { success: boolean; error: string };
    expect(refused.success).toBe(false);
    expect(refused.error).toContain("fetch failed");
    const detail = (await host.request("GET", `/bundles/${offline}`)).body as { network: boolean };
    expect(detail.network).toBe(false);
  });

  it("a remote server over Streamable HTTP, its headers sent and never shown", async () => {
    expect((await run(remote, "say.hello-world", { name: "Cy" })).body).toEqual({
      success: true,
      output: "Hello, Cy!",
    });
    const detail = (await host.request("GET", `/bundles/${remote}`)).body as {
      server: { transport: string; state: string };
    };
    expect(detail.server).toMatchObject({ transport: "streamable-http", state: "running" });
    expect(http.authorizations).toContain(`Bearer ${HEADER_SECRET}`);
  });

  it("a remote server that only speaks HTTP+SSE is reached through the older transport", async () => {
    expect((await run(legacy, "say.hello-world", { name: "Ed" })).body).toEqual({
      success: true,
      output: "Hello, Ed!",
    });
    const detail = (await host.request("GET", `/bundles/${legacy}`)).body as {
      server: { transport: string; state: string };
    };
    expect(detail.server).toMatchObject({ transport: "sse", state: "running" });
    expect(sse.authorizations.every((value) => value === `Bearer ${HEADER_SECRET}`)).toBe(true);
  });

  it('type = "sse" speaks HTTP+SSE alone; type = "http" speaks Streamable HTTP alone (no fall-back)', async () => {
    expect((await run(sseTyped, "say.hello-world", { name: "Fy" })).body).toEqual({
      success: true,
      output: "Hello, Fy!",
    });
    expect(
      ((await host.request("GET", `/bundles/${sseTyped}`)).body as { server: unknown }).server,
    ).toMatchObject({ transport: "sse", state: "running" });
    await vi.waitFor(
      async () => {
        const detail = (await host.request("GET", `/bundles/${httpTyped}`)).body as {
          server: { transport: string; state: string; lastError?: string };
        };
        expect(detail.server).toMatchObject({ transport: "streamable-http", state: "failed" });
        expect(detail.server.lastError).not.toContain("HTTP+SSE");
      },
      { timeout: 20_000 },
    );
  });

  it("a server that keeps failing shows as failed with its last error, and GET /health reports it", async () => {
    const failed = (await run(badRemote, "say.hello-world", { name: "x" })).status;
    expect(failed).toBe(404);
    await vi.waitFor(
      async () => {
        const health = await host.request("GET", "/health");
        const failing =
          (health.body as { mcpServersFailing?: { name: string; lastError?: string }[] }).mcpServersFailing ??
          [];
        const lastError = failing.find((server) => server.name === badRemote)?.lastError;
        expect(lastError).toMatch(/401|nauthorized/);
        expect(lastError).toContain("the server refused the headers it was given (Authorization)");
      },
      { timeout: 20_000 },
    );
    const detail = (await host.request("GET", `/bundles/${badRemote}`)).body as { server: { state: string } };
    expect(detail.server.state).toBe("failed");
  });

  it("nothing but config.toml changes a server: remove, update, install-by-name and config values are refused", async () => {
    for (const path of ["/remove", "/update"]) {
      const answer = await host.request("POST", path, { name: stdio });
      expect(answer.status).toBe(409);
      expect(JSON.stringify(answer.body)).toContain("declared in config.toml");
    }
    expect((await host.request("POST", "/create", { name: stdio, description: "x" })).status).toBe(409);
    expect((await host.request("POST", "/configure", { name: stdio, config: { key: "v" } })).status).toBe(
      409,
    );
  });

  it("per-tool permissions work as for other plugins", async () => {
    const set = await host.request("POST", "/configure", {
      name: stdio,
      config: { permissions: ["whoami"] },
    });
    expect(set.status).toBe(200);
    expect((await run(stdio, "say.hello-world", { name: "Di" })).status).toBe(403);
    expect(((await run(stdio, "whoami")).body as { success: boolean }).success).toBe(true);
    await host.request("POST", "/configure", { name: stdio, config: { permissions: ["*"] } });
  });

  it("a declaration removed from the file: the server is stopped, gone from the listing, its user removed", async () => {
    const file = join(root, "mcp-servers.json");
    const declared = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
    delete declared[quick];
    writeFileSync(file, JSON.stringify(declared));
    await vi.waitFor(async () => expect((await host.request("GET", `/bundles/${quick}`)).status).toBe(404), {
      timeout: 15_000,
    });
    const names = (
      (await host.request("GET", "/bundles")).body as { plugins: { name: string }[] }
    ).plugins.map((plugin) => plugin.name);
    expect(names).toContain(stdio);
    expect(names).not.toContain(quick);
    if (isRoot) expect(userExists(pluginUserName(quick))).toBe(false);
  });

  it("never logs a secret", () => {
    expect(lines.length).toBeGreaterThan(0);
    expectNoSecrets(lines.join("\n"));
  });

  it.runIf(isRoot)("stops every server's process when the runner stops", async () => {
    const running = () =>
      spawnSync("pgrep", ["-u", pluginUserName(stdio)], { encoding: "utf8" }).stdout.trim();
    expect(running()).not.toBe("");
    await host.host.mcp.stopAll();
    await vi.waitFor(() => expect(running()).toBe(""), { timeout: 10_000 });
  });
});
