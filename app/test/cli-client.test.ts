import { afterEach, beforeEach, describe, it, expect, vi } from "vitest";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Writable } from "node:stream";
import { checkBasicPassword } from "@stavrobot/common";
import { createServer, type Server, type ServerResponse } from "node:http";
import {
  freePort,
  startFakeApp,
  textTurn,
  toolTurn,
  type FakeApp,
  type FakeAppReply,
} from "@stavrobot/common/test-support";
import { runClient } from "../src/cli/client.js";
import { HELP_TEXT, NEW_TEXT } from "../src/cli/commands.js";
import { PASSWORD as APP_PASSWORD, configFor, useTestApp, handOver } from "./helpers/app.js";
import { REPO_ROOT, asProcess, type Session } from "./helpers/cli.js";

const PASSWORD = "cli-test-password";

interface Ended {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function toEnd(session: Session, input: string): Promise<Ended> {
  session.stdin.end(input);
  const code = await session.exit;
  return { code, stdout: session.stdout(), stderr: session.stderr() };
}

/** The client in this process, on in-memory streams. */
function inProcess(argv: string[], env: NodeJS.ProcessEnv): Session {
  let stdout = "";
  let stderr = "";
  const sink = (append: (text: string) => void) =>
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        append(chunk.toString());
        done();
      },
    });
  const stdin = new PassThrough();
  const exit = runClient({
    argv,
    env,
    stdin,
    stdout: sink((text) => (stdout += text)),
    stderr: sink((text) => (stderr += text)),
  });
  return { stdin, stdout: () => stdout, stderr: () => stderr, exit, kill: () => stdin.destroy() };
}

const run = (argv: string[], env: NodeJS.ProcessEnv, input = "") => toEnd(inProcess(argv, env), input);

type Mode = { kind: "echo" } | { kind: "reply"; reply: FakeAppReply };

/** The app's public `POST /chat` as the CLI sees it: "reply to <message>", or what `mode` says. */
function useFakeApp(): {
  app: () => FakeApp;
  env: () => { STAVROBOT_URL: string; STAVROBOT_PASSWORD: string };
  setMode: (mode: Mode) => void;
} {
  let app: FakeApp;
  let mode: Mode = { kind: "echo" };
  beforeEach(async () => {
    mode = { kind: "echo" };
    app = await startFakeApp({
      password: PASSWORD,
      answer: ({ message }) => {
        if (mode.kind === "reply") return mode.reply;
        if (message === "please fail") return { status: 500, json: { error: "model exploded" } };
        return { status: 200, json: { response: `reply to ${String(message)}` } };
      },
    });
  });
  afterEach(() => app.close());
  return {
    app: () => app,
    env: () => ({ STAVROBOT_URL: app.url, STAVROBOT_PASSWORD: PASSWORD }),
    setMode: (next) => (mode = next),
  };
}

describe("CLI client (runClient) against the fake app", () => {
  const fake = useFakeApp();
  const { env } = fake;
  const requests = () => {
    const app = fake.app();
    return app.messages.map((body, i) => ({
      authorized: checkBasicPassword(app.authorizations[i], PASSWORD),
      contentType: app.contentTypes[i],
      body,
    }));
  };

  it('-m "hi" sends {message, source: "cli"} with Basic auth, prints the reply and exits 0', async () => {
    const r = await run(["-m", "hi"], env());
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("reply to hi\n");
    expect(r.code).toBe(0);
    expect(requests()).toEqual([
      { authorized: true, contentType: "application/json", body: { message: "hi", source: "cli" } },
    ]);
  });

  it("accepts a trailing slash on STAVROBOT_URL", async () => {
    const r = await run(["-m", "slash"], { ...env(), STAVROBOT_URL: fake.app().url + "/" });
    expect(r.stdout).toBe("reply to slash\n");
    expect(r.code).toBe(0);
  });

  it("a wrong password exits 1 with a message about the password", async () => {
    const r = await run(["-m", "hi"], { ...env(), STAVROBOT_PASSWORD: "not-the-password" });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/password/i);
    expect(r.stderr).toContain("STAVROBOT_PASSWORD");
    expect(r.stdout).toBe("");
    expect(requests()).toHaveLength(1);
    expect(requests()[0]?.authorized).toBe(false);
  });

  it.each([500, 503])("a %i with {error} exits 1 and prints the server's error", async (status) => {
    fake.setMode({ kind: "reply", reply: { status, text: '{"error":"x marks the spot"}' } });
    const r = await run(["-m", "hi"], env());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(String(status));
    expect(r.stderr).toContain("x marks the spot");
    expect(r.stdout).toBe("");
  });

  it("a non-JSON error body is shown as text", async () => {
    fake.setMode({ kind: "reply", reply: { status: 502, text: "<html>Bad Gateway</html>" } });
    const r = await run(["-m", "hi"], env());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("502");
    expect(r.stderr).toContain("Bad Gateway");
  });

  it("a turn that failed (200 with failed: true) prints its text to stderr and exits 1", async () => {
    fake.setMode({
      kind: "reply",
      reply: {
        status: 200,
        text: '{"response":"Something went wrong: overloaded (HTTP 529)","failed":true}',
      },
    });
    const r = await run(["-m", "hi"], env());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Something went wrong: overloaded (HTTP 529)");
    expect(r.stdout).toBe("");
  });

  it("a 200 without a string response exits 1", async () => {
    fake.setMode({ kind: "reply", reply: { status: 200, text: '{"answer":"wrong shape"}' } });
    const r = await run(["-m", "hi"], env());
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/unexpected answer/);
    expect(r.stdout).toBe("");
  });

  it("an unreachable URL exits 3 with 'Cannot reach', saying nothing was sent", async () => {
    const target = `http://127.0.0.1:${await freePort()}`;
    const r = await run(["-m", "hi"], { ...env(), STAVROBOT_URL: target });
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(`Cannot reach ${target} (ECONNREFUSED): nothing was sent. Check STAVROBOT_URL.\n`);
  });

  it("a lock left by an app that is gone is not followed: PORT is", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "stavrobot-stale-lock-"));
    try {
      // This process's pid, but not this process: it started at another time (the pid was reused).
      const stale = { pid: process.pid, processStart: "1", token: "x", port: await freePort() };
      writeFileSync(join(dataDir, "instance.lock"), JSON.stringify(stale));
      const { port } = fake.app();
      const r = await run(["-m", "hi"], {
        STAVROBOT_PASSWORD: PASSWORD,
        DATA_DIR: dataDir,
        PORT: String(port),
      });
      expect(r.stdout).toBe("reply to hi\n");
      expect(r.code).toBe(0);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it.each(["/help", "/HELP ", "/new"])('-m "%s" is answered here, and nothing is sent', async (command) => {
    const r = await run(["-m", command], env());
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(command.includes("new") ? NEW_TEXT : HELP_TEXT);
    expect(requests()).toHaveLength(0);
  });

  it("REPL: /help and /new are answered here, never sent to the assistant", async () => {
    const r = await run([], env(), "/help\n/New\nhello\n");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(HELP_TEXT);
    expect(r.stdout).toContain(NEW_TEXT);
    expect(r.stdout).toContain("reply to hello\n");
    expect(requests().map((q) => q.body.message)).toEqual(["hello"]);
  });

  it("no STAVROBOT_PASSWORD exits 2 without calling the server", async () => {
    const r = await run(["-m", "hi"], { STAVROBOT_URL: fake.app().url });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("STAVROBOT_PASSWORD");
    expect(requests()).toHaveLength(0);
  });

  it.each([[["-m"]], [["-m", "   "]]])("%j without text exits 2 without calling the server", async (args) => {
    const r = await run(args, env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("-m needs a message");
    expect(requests()).toHaveLength(0);
  });

  it("--help prints usage and exits 0", async () => {
    const r = await run(["--help"], {});
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage:");
  });

  it("REPL: two lines, an empty line that ends nothing, then Ctrl-D: both replies, exit 0", async () => {
    const session = inProcess([], env());
    await vi.waitFor(() => expect(session.stdout()).toContain("> "));
    session.stdin.write("first message\n");
    await vi.waitFor(() => expect(session.stdout()).toContain("reply to first message\n"));
    // A stray Enter sends nothing and ends nothing.
    session.stdin.write("\n");
    session.stdin.write("second message\n");
    await vi.waitFor(() => expect(session.stdout()).toContain("reply to second message\n"));
    session.stdin.end();
    expect(await session.exit).toBe(0);
    expect(session.stdout()).toContain(`Connected to ${fake.app().url}`);
    expect(session.stderr()).toBe("");
    expect(requests().map((r) => r.body)).toEqual([
      { message: "first message", source: "cli" },
      { message: "second message", source: "cli" },
    ]);
  });

  it("REPL: a server error is reported and the session goes on", async () => {
    const session = inProcess([], env());
    await vi.waitFor(() => expect(session.stdout()).toContain("> "));
    session.stdin.write("please fail\n");
    await vi.waitFor(() => expect(session.stderr()).toContain("model exploded"));
    session.stdin.write("after\n");
    await vi.waitFor(() => expect(session.stdout()).toContain("reply to after\n"));
    session.stdin.end();
    expect(await session.exit).toBe(0);
    expect(requests()).toHaveLength(2);
  });

  // The prompt says "Ctrl-D exits".
  it("REPL: closing stdin (Ctrl-D) exits 0 without sending anything", async () => {
    const r = await run([], env(), "");
    expect(r.stdout).toContain("> ");
    expect(r.code).toBe(0);
    expect(requests()).toHaveLength(0);
  });

  // Piping a conversation in (`printf 'a\nb\n' | npm run chat`) must answer every line.
  it("REPL: lines piped in all at once are all answered", async () => {
    const r = await run([], env(), "one\ntwo\n\n");
    expect(r.code).toBe(0);
    expect(requests().map((q) => q.body.message)).toEqual(["one", "two"]);
    expect(r.stdout).toContain("reply to one\n");
    expect(r.stdout).toContain("reply to two\n");
  });

  it("REPL: answers kept while away are shown first, with their source, then marked seen", async () => {
    fake.app().pendingAnswers.push(
      {
        id: 7,
        message: "export the rows\nin full",
        source: "plugin:exporter/export",
        response: "120 rows.",
      },
      { id: 8, message: "", source: "web", response: "Saved your photo." },
    );
    const r = await run([], env(), "\n");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      "While you were away:\n\n> export the rows (plugin:exporter/export)\n120 rows.\n\n" +
        "> (attachment)\nSaved your photo.\n\n",
    );
    expect(fake.app().pendingAnswers).toEqual([]);
    expect((await run([], env(), "\n")).stdout).not.toContain("While you were away");
  });
});

describe("CLI client as a process (npm run chat)", () => {
  const { env } = useFakeApp();

  // process.exitCode carries the client's code to the shell.
  it.each([
    {
      why: "the server failed",
      argv: ["-m", "please fail"],
      password: true,
      code: 1,
      says: "model exploded",
    },
    { why: "no password is set", argv: ["-m", "hi"], password: false, code: 2, says: "STAVROBOT_PASSWORD" },
  ])("exits with the client's code when $why", async ({ argv, password, code, says }) => {
    const { STAVROBOT_URL, STAVROBOT_PASSWORD } = env();
    const r = await toEnd(
      asProcess(argv, password ? { STAVROBOT_URL, STAVROBOT_PASSWORD } : { STAVROBOT_URL }),
      "",
    );
    expect(r.code).toBe(code);
    expect(r.stderr).toContain(says);
  });

  // As its own process: a line answered, then Ctrl-D.
  it("REPL: as a process, answers a line and ends at Ctrl-D", async () => {
    const session = asProcess([], env());
    await vi.waitFor(() => expect(session.stdout()).toContain("> "), { timeout: 20_000 });
    session.stdin.write("first message\n");
    await vi.waitFor(() => expect(session.stdout()).toContain("reply to first message\n"), {
      timeout: 20_000,
    });
    session.stdin.end();
    expect(await session.exit).toBe(0);
    expect(session.stderr()).toBe("");
  });

  // `npm run chat` from a checkout whose path contains a space must still run the client.
  it("runs from a checkout whose path contains a space", async () => {
    const root = mkdtempSync(join(tmpdir(), "stavrobot cli "));
    try {
      mkdirSync(join(root, "app", "src", "cli"), { recursive: true });
      // The client and the modules beside it.
      for (const name of readdirSync(join(REPO_ROOT, "app", "src", "cli")))
        copyFileSync(join(REPO_ROOT, "app", "src", "cli", name), join(root, "app", "src", "cli", name));
      writeFileSync(join(root, "package.json"), '{ "type": "module" }\n');
      symlinkSync(join(REPO_ROOT, "node_modules"), join(root, "node_modules"), "dir");
      const r = await toEnd(asProcess(["-m", "hi"], env(), root), "");
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      expect(r.stdout).toBe("reply to hi\n");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("CLI client against the real app: answers kept while no terminal was open", () => {
  const t = useTestApp();

  it("shows them when a session starts, once", async () => {
    // A plugin's result arrives while nobody is at a terminal, and the owner has no push channel.
    t.fake.enqueue(textTurn("Your backup finished: 3 GB."));
    const response = await handOver(t.app, {
      source: "plugin:backup/run",
      message: 'The run of tool "run" returned: 3 GB',
    });
    expect(response.status).toBe(202);
    await vi.waitFor(async () => {
      await t.app.queue.idle();
      const done = await t.app.db.query("SELECT 1 FROM inbox WHERE status = 'done'");
      expect(done.rows).toHaveLength(1);
    });
    const env = { STAVROBOT_URL: `http://127.0.0.1:${t.app.port}`, STAVROBOT_PASSWORD: APP_PASSWORD };
    const first = await run([], env, "\n");
    expect(first.code).toBe(0);
    expect(first.stdout).toContain("While you were away:");
    expect(first.stdout).toContain(
      '> The run of tool "run" returned: 3 GB (plugin:backup/run)\nYour backup finished: 3 GB.',
    );
    // Seen now: neither the next session nor the next reply repeats it.
    const second = await run([], env, "\n");
    expect(second.stdout).not.toContain("While you were away");
    t.fake.enqueue(textTurn("hello"));
    const reply = await run(["-m", "hi"], env);
    expect(reply.stdout).toBe("hello\n");
  });
});

describe("CLI client when the connection breaks", () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
    server = undefined;
  });

  /** An app that answers /chat as `answer` says, then cuts the connection. */
  async function cutting(answer: (res: ServerResponse) => void): Promise<string> {
    server = createServer((req, res) => {
      if (req.url !== "/chat") return void res.writeHead(404).end();
      req.resume();
      req.on("end", () => answer(res));
    });
    const port = await new Promise<number>((resolve) =>
      server?.listen(0, "127.0.0.1", () => resolve((server?.address() as { port: number }).port)),
    );
    return `http://127.0.0.1:${port}`;
  }

  it("after the app said the message is saved: says it was saved", async () => {
    const url = await cutting((res) => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      res.write('event: accepted\ndata: {"id":7}\n\n');
      setTimeout(() => res.destroy(), 50);
    });
    const r = await run(["-m", "hi"], { STAVROBOT_URL: url, STAVROBOT_PASSWORD: PASSWORD });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/ended before the answer\. Your message was saved/);
  });

  it("before the app said anything: does not claim the message was saved", async () => {
    const url = await cutting((res) => res.destroy());
    const r = await run(["-m", "hi"], { STAVROBOT_URL: url, STAVROBOT_PASSWORD: PASSWORD });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`The connection to ${url} broke`);
    expect(r.stderr).toContain("If the message reached the assistant it was saved");
    expect(r.stderr).not.toContain("Your message was saved");
  });
});

describe("CLI client against the real app: -m shows what the turn does as it happens", () => {
  const t = useTestApp();

  it("each tool on stderr while stdout (a pipe) gets the answer alone", async () => {
    t.fake.reset();
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    t.fake.enqueue(toolTurn("execute_sql", { query: "SELECT 1 AS one" }), { ...textTurn("One."), gate });
    const env = { STAVROBOT_URL: `http://127.0.0.1:${t.app.port}`, STAVROBOT_PASSWORD: APP_PASSWORD };
    const session = asProcess(["-m", "count to one"], env);
    let ended = false;
    void session.exit.then(() => (ended = true));
    // Shown while the turn still runs, not when it ends.
    await vi.waitFor(() => expect(session.stderr()).toBe("· execute_sql\n"), { timeout: 20_000 });
    expect(ended).toBe(false);
    release();
    expect(await session.exit).toBe(0);
    expect(session.stdout()).toBe("One.\n");
  });
});

describe("CLI client against the real app with its provider down", () => {
  // Nothing listens on the discard port; one retry, two seconds after the first attempt.
  const t = useTestApp({
    config: () =>
      configFor({ url: "http://127.0.0.1:9" }).replace("retryDelaySeconds = 0", "retryDelaySeconds = 2"),
  });
  const env = () => ({ STAVROBOT_URL: `http://127.0.0.1:${t.app.port}`, STAVROBOT_PASSWORD: APP_PASSWORD });
  const RETRY = "· Connection error. Trying again in 2 s (retry 1 of 1).\n";

  it("-m says at once that it tries again, and why, then why it gave up", async () => {
    const session = asProcess(["-m", "are you there?"], env());
    let ended = false;
    void session.exit.then(() => (ended = true));
    await vi.waitFor(() => expect(session.stderr()).toBe(RETRY), { timeout: 20_000 });
    expect(ended).toBe(false);
    expect(await session.exit).toBe(1);
    expect(session.stderr()).toBe(`${RETRY}Something went wrong: Connection error.\n`);
    expect(session.stdout()).toBe("");
  });

  it("the REPL says the same, as it happens", async () => {
    await t.app.queue.idle();
    const session = inProcess([], env());
    await vi.waitFor(() => expect(session.stdout()).toContain("> "));
    session.stdin.write("hello?\n");
    await vi.waitFor(() => expect(session.stderr()).toBe(RETRY), { timeout: 20_000 });
    await vi.waitFor(
      () => expect(session.stderr()).toBe(`${RETRY}Something went wrong: Connection error.\n`),
      { timeout: 20_000 },
    );
    session.stdin.end();
    expect(await session.exit).toBe(0);
  });
});
