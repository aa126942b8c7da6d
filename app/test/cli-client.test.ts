import { describe, it, expect, beforeAll, afterAll, beforeEach } from "vitest";
import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { checkBasicPassword } from "@stavrobot/common";
import { freePort } from "@stavrobot/common/test-support";

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
const CLIENT = "app/src/cli/client.ts";
const PASSWORD = "cli-test-password";

interface ChatRequest {
  authorized: boolean;
  contentType: string | undefined;
  body: unknown;
}

type Mode =
  { kind: "echo" } | { kind: "error"; status: number; body: string } | { kind: "raw"; body: string };

interface Run {
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when stdout contains the text (rejects after a timeout). */
  waitForStdout: (text: string) => Promise<void>;
  exit: Promise<number | null>;
}

function cliEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith("STAVROBOT_")) delete env[key];
  delete env.NODE_OPTIONS;
  for (const [key, value] of Object.entries(extra)) if (value !== undefined) env[key] = value;
  return env;
}

function start(args: string[], env: Record<string, string | undefined>, cwd = REPO_ROOT): Run {
  const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", CLIENT, ...args], {
    cwd,
    env: cliEnv(env),
    stdio: "pipe",
  });
  let stdout = "";
  let stderr = "";
  const waiters: { text: string; resolve: () => void }[] = [];
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    stdout += chunk;
    for (const waiter of [...waiters]) {
      if (stdout.includes(waiter.text)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  });
  child.stderr.on("data", (chunk: string) => (stderr += chunk));
  const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const exit = new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve(code);
    });
  });
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exit,
    waitForStdout: (text) =>
      new Promise<void>((resolve, reject) => {
        if (stdout.includes(text)) return resolve();
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `timed out waiting for ${JSON.stringify(text)}; stdout: ${stdout}; stderr: ${stderr}`,
              ),
            ),
          20_000,
        );
        waiters.push({
          text,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
        void exit.then(() => {
          if (!stdout.includes(text)) {
            clearTimeout(timer);
            reject(
              new Error(
                `exited before printing ${JSON.stringify(text)}; stdout: ${stdout}; stderr: ${stderr}`,
              ),
            );
          }
        });
      }),
  };
}

async function runToEnd(args: string[], env: Record<string, string | undefined>, input = "", cwd?: string) {
  const run = start(args, env, cwd);
  run.child.stdin.end(input);
  const code = await run.exit;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

describe("CLI client (app/src/cli/client.ts) as a subprocess", () => {
  let server: Server;
  let url: string;
  let requests: ChatRequest[] = [];
  let mode: Mode = { kind: "echo" };

  function answer(res: ServerResponse, status: number, body: string): void {
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(body);
  }

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        if (req.method !== "POST" || req.url !== "/chat") return answer(res, 404, '{"error":"Not found"}');
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          body = undefined;
        }
        const authorized = checkBasicPassword(req.headers.authorization, PASSWORD);
        requests.push({ authorized, contentType: req.headers["content-type"], body });
        if (!authorized) return answer(res, 401, '{"error":"Unauthorized"}');
        const message = (body as { message?: unknown } | undefined)?.message;
        if (mode.kind === "error") return answer(res, mode.status, mode.body);
        if (mode.kind === "raw") return answer(res, 200, mode.body);
        if (message === "please fail") return answer(res, 500, '{"error":"model exploded"}');
        answer(res, 200, JSON.stringify({ response: `reply to ${String(message)}` }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  beforeEach(() => {
    requests = [];
    mode = { kind: "echo" };
  });

  const env = () => ({ STAVROBOT_URL: url, STAVROBOT_PASSWORD: PASSWORD });

  it('-m "hi" sends {message, source: "cli"} with Basic auth, prints the reply and exits 0', async () => {
    const r = await runToEnd(["-m", "hi"], env());
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("reply to hi\n");
    expect(r.code).toBe(0);
    expect(requests).toEqual([
      { authorized: true, contentType: "application/json", body: { message: "hi", source: "cli" } },
    ]);
  });

  it("accepts a trailing slash on STAVROBOT_URL", async () => {
    const r = await runToEnd(["-m", "slash"], { ...env(), STAVROBOT_URL: url + "/" });
    expect(r.stdout).toBe("reply to slash\n");
    expect(r.code).toBe(0);
  });

  it("a wrong password exits 1 with a message about the password", async () => {
    const r = await runToEnd(["-m", "hi"], { ...env(), STAVROBOT_PASSWORD: "not-the-password" });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/password/i);
    expect(r.stderr).toContain("STAVROBOT_PASSWORD");
    expect(r.stdout).toBe("");
    expect(requests).toHaveLength(1);
    expect(requests[0]?.authorized).toBe(false);
  });

  it.each([500, 503])("a %i with {error} exits 1 and prints the server's error", async (status) => {
    mode = { kind: "error", status, body: '{"error":"x marks the spot"}' };
    const r = await runToEnd(["-m", "hi"], env());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(String(status));
    expect(r.stderr).toContain("x marks the spot");
    expect(r.stdout).toBe("");
  });

  it("a non-JSON error body is shown as text", async () => {
    mode = { kind: "error", status: 502, body: "<html>Bad Gateway</html>" };
    const r = await runToEnd(["-m", "hi"], env());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("502");
    expect(r.stderr).toContain("Bad Gateway");
  });

  it("a 200 without a string response exits 1", async () => {
    mode = { kind: "raw", body: '{"answer":"wrong shape"}' };
    const r = await runToEnd(["-m", "hi"], env());
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/unexpected answer/);
    expect(r.stdout).toBe("");
  });

  it("an unreachable URL exits 3 with 'Cannot reach'", async () => {
    const port = await freePort();
    const target = `http://127.0.0.1:${port}`;
    const r = await runToEnd(["-m", "hi"], { ...env(), STAVROBOT_URL: target });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`Cannot reach ${target}`);
    expect(r.stderr).toContain("ECONNREFUSED");
  });

  it("no STAVROBOT_PASSWORD exits 2 without calling the server", async () => {
    const r = await runToEnd(["-m", "hi"], { STAVROBOT_URL: url });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("STAVROBOT_PASSWORD");
    expect(requests).toHaveLength(0);
  });

  it.each([[["-m"]], [["-m", "   "]]])("%j without text exits 2 without calling the server", async (args) => {
    const r = await runToEnd(args, env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("-m needs a message");
    expect(requests).toHaveLength(0);
  });

  it("--help prints usage and exits 0", async () => {
    const r = await runToEnd(["--help"], {});
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage:");
  });

  it("REPL: two lines then an empty line prints both replies and exits 0", async () => {
    const run = start([], env());
    await run.waitForStdout("> ");
    run.child.stdin.write("first message\n");
    await run.waitForStdout("reply to first message\n");
    run.child.stdin.write("second message\n");
    await run.waitForStdout("reply to second message\n");
    run.child.stdin.write("\n");
    expect(await run.exit).toBe(0);
    expect(run.stdout()).toContain(`Connected to ${url}`);
    expect(run.stderr()).toBe("");
    expect(requests.map((r) => r.body)).toEqual([
      { message: "first message", source: "cli" },
      { message: "second message", source: "cli" },
    ]);
  });

  it("REPL: a server error is reported and the session goes on", async () => {
    const run = start([], env());
    await run.waitForStdout("> ");
    run.child.stdin.write("please fail\n");
    await run.waitForStdout("> ");
    // Wait for the error and the next prompt.
    for (let i = 0; i < 200 && !run.stderr().includes("model exploded"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(run.stderr()).toContain("model exploded");
    run.child.stdin.write("after\n");
    await run.waitForStdout("reply to after\n");
    run.child.stdin.write("\n");
    expect(await run.exit).toBe(0);
    expect(requests).toHaveLength(2);
  });

  // The prompt says "an empty line or Ctrl-D exits"; the client's catch around rl.question expects it.
  it("REPL: closing stdin (Ctrl-D) exits 0 without sending anything", async () => {
    const r = await runToEnd([], env(), "");
    expect(r.stdout).toContain("> ");
    expect(r.code).toBe(0);
    expect(requests).toHaveLength(0);
  });

  // Piping a conversation in (`printf 'a\nb\n' | npm run chat`) must answer every line.
  it("REPL: lines piped in all at once are all answered", async () => {
    const r = await runToEnd([], env(), "one\ntwo\n\n");
    expect(r.code).toBe(0);
    expect(requests.map((q) => (q.body as { message: string }).message)).toEqual(["one", "two"]);
    expect(r.stdout).toContain("reply to one\n");
    expect(r.stdout).toContain("reply to two\n");
  });

  // `npm run chat` from a checkout whose path contains a space must still run the client.
  it("runs from a checkout whose path contains a space", async () => {
    const root = mkdtempSync(join(tmpdir(), "stavrobot cli "));
    try {
      mkdirSync(join(root, "app", "src", "cli"), { recursive: true });
      copyFileSync(join(REPO_ROOT, CLIENT), join(root, CLIENT));
      writeFileSync(join(root, "package.json"), '{ "type": "module" }\n');
      symlinkSync(join(REPO_ROOT, "node_modules"), join(root, "node_modules"), "dir");
      const r = await runToEnd(["-m", "hi"], env(), "", root);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout).toBe("reply to hi\n");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
