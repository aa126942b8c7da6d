import { execFile } from "node:child_process";
import { promisify } from "node:util";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn, type RecordedRequest } from "@stavrobot/common/test-support";
import { FileAreas } from "../src/files/areas.js";
import { removeOldFiles } from "../src/files/housekeeping.js";
import { InboxStore } from "../src/db/inbox.js";
import { PASSWORD, chat, useTestApp } from "./helpers/app.js";
import { silentLogger } from "@stavrobot/common";

const run = promisify(execFile);
const t = useTestApp();
const base = () => `http://127.0.0.1:${t.app.port}`;
const auth = { Authorization: basicAuthHeader(PASSWORD) };

/** Has the model call one tool, then answer; returns what the tool answered (as the model saw it). */
async function callTool(name: string, input: Record<string, unknown>): Promise<string> {
  t.fake.enqueue(toolTurn(name, input), textTurn("ok"));
  const before = t.fake.requests.length;
  const response = await chat(t.app, `please use ${name}`);
  expect(response.status).toBe(200);
  return t.fake.requests[before + 1]?.lastUserText ?? "";
}

/** The tool_result blocks the model was sent in a request. */
function toolResults(request: RecordedRequest | undefined): { content: unknown }[] {
  const last = (request?.body.messages as { content: unknown }[] | undefined)?.at(-1);
  const blocks = Array.isArray(last?.content) ? (last.content as { type: string; content: unknown }[]) : [];
  return blocks.filter((block) => block.type === "tool_result");
}

/** A 1×1 PNG. */
const PNG_BASE64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

describe("manage_cron through /chat", () => {
  it("refuses bad expressions and both or neither of schedule and fire_at, naming the problem", async () => {
    expect(await callTool("manage_cron", { action: "create", note: "x", schedule: "61 * * * *" })).toMatch(
      /not a valid cron expression: .*59/,
    );
    expect(await callTool("manage_cron", { action: "create", note: "x", schedule: "every day" })).toMatch(
      /not a cron expression/,
    );
    expect(
      await callTool("manage_cron", {
        action: "create",
        note: "x",
        schedule: "0 9 * * *",
        fire_at: "2030-01-01T09:00",
      }),
    ).toContain("either 'schedule' or 'fire_at', not both");
    expect(await callTool("manage_cron", { action: "create", note: "x" })).toContain(
      "exactly one of 'schedule'",
    );
    expect(await callTool("manage_cron", { action: "create", note: "x", fire_at: "next tuesday" })).toContain(
      "'fire_at' must be an ISO date-time",
    );
  });

  it("lists the seeded maintenance entries, and a one-shot fires on time and its answer reaches the owner", async () => {
    const listed = await callTool("manage_cron", { action: "list" });
    expect(listed).toContain("[nightly-review]");
    expect(listed).toContain("[daily-maintenance]");
    const soon = new Date(Date.now() + 1_500).toISOString();
    expect(
      await callTool("manage_cron", { action: "create", note: "water the plants", fire_at: soon }),
    ).toMatch(/Cron entry \d+ created\. Next firing: /);
    t.fake.enqueue(textTurn("Time to water the plants!"));
    const before = t.fake.requests.length;
    await vi.waitFor(() => expect(t.fake.requests.length).toBe(before + 1), {
      timeout: 10_000,
      interval: 100,
    });
    const fired = t.fake.requests[before]?.lastUserText ?? "";
    expect(fired).toContain("Source: cron");
    expect(fired).toMatch(/\[Cron entry \d+ has fired\] water the plants/);
    await t.app.queue.idle();
    t.fake.enqueue(textTurn("Anything else?"));
    const next = await chat(t.app, "hello");
    expect(next.body.response).toContain("Time to water the plants!");
    expect(await callTool("manage_cron", { action: "list" })).not.toContain("water the plants");
  });
});

describe("pages through /chat and over HTTP", () => {
  it("serves public pages to anyone and private ones only with the password", async () => {
    expect(
      await callTool("manage_pages", {
        action: "upsert",
        path: "hello",
        content: "<h1>Hi</h1>",
        mimetype: "text/html",
        is_public: true,
      }),
    ).toBe("Page created at /pages/hello");
    await callTool("manage_pages", {
      action: "upsert",
      path: "diary/today",
      content: "secret",
      mimetype: "text/plain",
    });
    const open = await fetch(`${base()}/pages/hello/`);
    expect(open.status).toBe(200);
    expect(open.headers.get("content-type")).toBe("text/html");
    expect(open.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(await open.text()).toBe("<h1>Hi</h1>");
    expect((await fetch(`${base()}/pages/diary/today`)).status).toBe(401);
    const mine = await fetch(`${base()}/pages/diary/today`, { headers: auth });
    expect(await mine.text()).toBe("secret");
    expect((await fetch(`${base()}/pages/nope`)).status).toBe(404);
    expect(await callTool("manage_pages", { action: "delete", path: "hello" })).toBe("Page deleted: hello");
    expect((await fetch(`${base()}/pages/hello`)).status).toBe(404);
    expect(
      await callTool("manage_pages", { action: "restore_version", path: "hello", version: 1 }),
    ).toContain("restored");
    expect((await fetch(`${base()}/pages/hello`)).status).toBe(200);
  });

  it("runs page queries read-only by construction, with bound parameters", async () => {
    await t.app.db.query("CREATE TABLE books (id serial PRIMARY KEY, title text, author text)");
    await t.app.db.query("INSERT INTO books (title, author) VALUES ('Dune', 'Herbert'), ('Emma', 'Austen')");
    await t.app.db.query("CREATE SEQUENCE page_counter");
    await t.app.db.query(
      "CREATE FUNCTION sneaky() RETURNS int LANGUAGE sql AS $$ INSERT INTO books (title) VALUES ('pwned') RETURNING 1 $$",
    );
    await t.app.db.query(
      "INSERT INTO pages (path, mimetype, data, is_public, queries) VALUES ('lib', 'text/html', 'x', true, $1)",
      [
        JSON.stringify({
          by_author: "SELECT title FROM books WHERE author = $param:author ORDER BY id",
          insert: "INSERT INTO books (title) VALUES ('x')",
          chained: "SELECT 1; DROP TABLE books",
          update_drop: "UPDATE books SET title = 'y'; DROP TABLE books",
          cte: "WITH d AS (DELETE FROM books RETURNING *) SELECT * FROM d",
          hidden: "SELECT 1 -- ; DROP TABLE books",
          block: "SELECT 1 /* ; */ ; DROP TABLE books",
          counter: "SELECT nextval('page_counter')",
          function: "SELECT sneaky()",
          forupdate: "SELECT * FROM books FOR UPDATE",
          // A backslash-escaped quote must not end the literal for the check either.
          escaped:
            "SELECT E'\\'' AS a) AS z; COMMIT; DROP TABLE books; SELECT * FROM (SELECT 'x' AS q, E'\\'' AS r",
          escaped_comment: "SELECT E'\\'' AS a -- '",
        }),
      ],
    );
    const query = (name: string, search = "") => fetch(`${base()}/api/pages/lib/queries/${name}${search}`);
    const ok = await query("by_author", "?author=Herbert");
    expect(await ok.json()).toEqual([{ title: "Dune" }]);
    const injected = await query("by_author", `?author=${encodeURIComponent("x' OR '1'='1")}`);
    expect(await injected.json()).toEqual([]);
    const missing = await query("by_author");
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({ error: "Missing query parameter: author", kind: "invalid" });
    for (const name of [
      "insert",
      "chained",
      "update_drop",
      "cte",
      "hidden",
      "block",
      "counter",
      "function",
      "forupdate",
      "escaped",
      "escaped_comment",
    ]) {
      const refused = await query(name);
      expect(refused.status, name).toBe(400);
    }
    // A legitimate E'' literal still works.
    await t.app.db.query(
      `UPDATE pages SET queries = queries || '{"tab": "SELECT E''a\\tb'' AS s"}'::jsonb WHERE path = 'lib'`,
    );
    expect(await (await query("tab")).json()).toEqual([{ s: "a\tb" }]);
    const rows = await t.app.db.query<{ title: string }>("SELECT title FROM books ORDER BY id");
    expect(rows.rows.map((row) => row.title)).toEqual(["Dune", "Emma"]);
    const counter = await t.app.db.query<{ last_value: number; is_called: boolean }>(
      "SELECT last_value, is_called FROM page_counter",
    );
    expect(counter.rows[0]?.is_called).toBe(false);
    // The model is told at once when a query it gives a page would be refused.
    expect(
      await callTool("manage_pages", {
        action: "upsert",
        path: "bad",
        content: "x",
        mimetype: "text/html",
        queries: { q: "SELECT 1; DELETE FROM books" },
      }),
    ).toContain('Query "q": Multiple SQL statements are not allowed');
  });
});

describe("page queries over HTTP", () => {
  const query = (name: string, headers: Record<string, string> = {}) =>
    fetch(`${base()}/api/pages/stats/queries/${name}`, { headers });

  it("answers a private page's query only with the password", async () => {
    expect(
      await callTool("manage_pages", {
        action: "upsert",
        path: "stats",
        content: "<p>stats</p>",
        mimetype: "text/html",
        queries: {
          one: "SELECT 1 AS one",
          many: "SELECT generate_series(1, 5000) AS n",
          slow: "SELECT pg_sleep(7) AS slept",
        },
      }),
    ).toBe("Page created at /pages/stats");
    const anonymous = await query("one");
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toMatch(/^Basic /);
    expect(await anonymous.text()).not.toContain('"one"');
    const wrong = await query("one", { Authorization: basicAuthHeader("not-the-password") });
    expect(wrong.status).toBe(401);
    const owner = await query("one", auth);
    expect(owner.status).toBe(200);
    expect(await owner.json()).toEqual([{ one: 1 }]);
  });

  it("returns at most 1000 rows", async () => {
    const response = await query("many", auth);
    expect(response.status).toBe(200);
    const rows = (await response.json()) as { n: number }[];
    expect(rows).toHaveLength(1000);
    expect(rows[0]).toEqual({ n: 1 });
    expect(rows.at(-1)).toEqual({ n: 1000 });
  });

  // PGlite (the embedded database) does not enforce statement_timeout: it has no timer signal to
  // cancel a running statement, so a slow page query runs to its end (holding the only connection
  // of the embedded database meanwhile). Open bug, not fixed here (app/src/pages/query.ts is not
  // this change's): the test is expected to fail on PGlite until the query gets a limit that works
  // there too.
  const onPglite = !process.env.TEST_DATABASE_URL;
  (onPglite ? it.fails : it)("stops a query at the 5 s statement timeout", async () => {
    const started = Date.now();
    const response = await query("slow", auth);
    const elapsed = Date.now() - started;
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toMatch(/statement timeout/);
    expect(elapsed).toBeGreaterThanOrEqual(4_500);
    expect(elapsed).toBeLessThan(6_500);
  });
});

describe("uploads and files", () => {
  it("takes a real multipart upload (curl -F), stores it and tells the assistant", async () => {
    const file = join(t.env.dir, "notes.txt");
    writeFileSync(file, "buy milk");
    t.fake.enqueue(textTurn("Got your notes."));
    const before = t.fake.requests.length;
    // curl runs as its own process (the server lives in this one, so it must not be blocked).
    const { stdout } = await run("curl", [
      "-s",
      "-u",
      `:${PASSWORD}`,
      "-F",
      `file=@${file}`,
      "-F",
      "filename=my notes.txt",
      `${base()}/api/upload`,
    ]);
    const answer = JSON.parse(stdout) as { message: string; filename: string };
    expect(answer.message).toBe("File uploaded successfully");
    expect(answer.filename).toMatch(/^upload-[0-9a-f-]{36}\.txt$/);
    await vi.waitFor(() => expect(t.fake.requests.length).toBe(before + 1), { timeout: 10_000 });
    const told = t.fake.requests[before]?.lastUserText ?? "";
    expect(told).toContain("Source: upload");
    expect(told).toContain("A file was received: my notes.txt (text/plain, 8 bytes)");
    expect(existsSync(join(t.env.dir, "files", "uploads", answer.filename))).toBe(true);
    await t.app.queue.idle();
  });

  it("refuses an upload over 10 MB with 413 and leaves nothing on disk; refuses a non-multipart body", async () => {
    const uploads = join(t.env.dir, "files", "uploads");
    const before = readdirSync(uploads).length;
    const big = new FormData();
    big.append("file", new Blob([Buffer.alloc(10 * 1024 * 1024 + 1)]), "big.bin");
    const refused = await fetch(`${base()}/api/upload`, { method: "POST", headers: auth, body: big });
    expect(refused.status).toBe(413);
    expect(await refused.json()).toEqual({ error: "File too large (max 10 MB)" });
    expect(readdirSync(uploads).length).toBe(before);
    const plain = await fetch(`${base()}/api/upload`, {
      method: "POST",
      headers: { ...auth, "Content-Type": "text/plain" },
      body: "x",
    });
    expect(plain.status).toBe(415);
    const empty = new FormData();
    empty.append("filename", "x");
    const noFile = await fetch(`${base()}/api/upload`, { method: "POST", headers: auth, body: empty });
    expect(noFile.status).toBe(400);
  });

  it("confines manage_files and manage_uploads: no '..', no path outside, no symlink", async () => {
    expect(
      await callTool("manage_files", { action: "write", filename: "todo.md", content: "a\nb\nc\n" }),
    ).toContain(join("files", "workspace", "todo.md"));
    expect(
      await callTool("manage_files", { action: "read_lines", filename: "todo.md", from: 2, to: 3 }),
    ).toContain("b\nc\n(lines 2-3 of 3 total)");
    expect(
      await callTool("manage_files", {
        action: "write_lines",
        filename: "todo.md",
        from: 2,
        to: 2,
        content: "B",
      }),
    ).toContain("Done. New total line count: 3.");
    expect(await callTool("manage_files", { action: "read", filename: "../main/config.toml" })).toContain(
      '".." is not allowed',
    );
    expect(await callTool("manage_files", { action: "read", filename: "/etc/passwd" })).toContain(
      "outside the file areas",
    );
    symlinkSync("/etc/passwd", join(t.env.dir, "files", "workspace", "link"));
    expect(await callTool("manage_files", { action: "read", filename: "link" })).toContain("symbolic link");
    expect(
      await callTool("manage_uploads", {
        action: "read",
        path: join(t.env.dir, "files", "workspace", "todo.md"),
      }),
    ).toContain("is not an upload");
  });

  it("manage_uploads reads an image as an image, a text file as text, and only notes a binary", async () => {
    const uploads = join(t.env.dir, "files", "uploads");
    writeFileSync(join(uploads, "upload-photo.png"), Buffer.from(PNG_BASE64, "base64"));
    writeFileSync(join(uploads, "upload-list.md"), "# Shopping\n- milk\n- bread\n");
    writeFileSync(join(uploads, "upload-backup.zip"), Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0xff]));

    t.fake.enqueue(
      toolTurn("manage_uploads", { action: "read", path: join(uploads, "upload-photo.png") }),
      textTurn("A tiny picture."),
    );
    const before = t.fake.requests.length;
    expect((await chat(t.app, "what is in the photo?")).status).toBe(200);
    const [shown] = toolResults(t.fake.requests[before + 1]);
    expect(shown?.content).toEqual([
      { type: "text", text: "(see attached image)" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_BASE64 } },
    ]);
    // The picture is not kept in the stored history (it would be resent every turn).
    const stored = await t.app.db.query<{ content: unknown }>(
      "SELECT content FROM messages WHERE role = 'toolResult' ORDER BY id DESC LIMIT 1",
    );
    expect(JSON.stringify(stored.rows[0]?.content)).toContain("[image (image/png) not kept in history]");
    expect(JSON.stringify(stored.rows[0]?.content)).not.toContain(PNG_BASE64);

    expect(await callTool("manage_uploads", { action: "read", path: join(uploads, "upload-list.md") })).toBe(
      "# Shopping\n- milk\n- bread\n",
    );
    expect(
      await callTool("manage_uploads", { action: "read", path: join(uploads, "upload-backup.zip") }),
    ).toBe(
      "Cannot read binary file directly (.zip). Pass its path to a plugin tool or run_python to process it.",
    );
    for (const path of ["../main/config.toml", `${uploads}/../../main/config.toml`]) {
      const refused = await callTool("manage_uploads", { action: "read", path });
      expect(refused).toContain('".." is not allowed');
      expect(refused).not.toContain("password");
    }
  });

  it("manage_files searches, edits by line, lists, copies, moves, deletes, and round-trips base64", async () => {
    const workspace = join(t.env.dir, "files", "workspace");
    const plan = join(workspace, "plan.txt");
    expect(
      await callTool("manage_files", {
        action: "write",
        filename: "plan.txt",
        content: "alpha\nbeta\ngamma\nbeta two\n",
      }),
    ).toBe(plan);
    expect(await callTool("manage_files", { action: "search", filename: "plan.txt", pattern: "beta" })).toBe(
      "2: beta\n4: beta two",
    );
    expect(
      await callTool("manage_files", { action: "search", filename: "plan.txt", pattern: "^g", regex: true }),
    ).toBe("3: gamma");
    expect(await callTool("manage_files", { action: "search", filename: "plan.txt", pattern: "zeta" })).toBe(
      "No matches.",
    );
    // from > to inserts before `from`; empty content deletes the lines.
    expect(
      await callTool("manage_files", {
        action: "write_lines",
        filename: "plan.txt",
        from: 2,
        to: 1,
        content: "inserted",
      }),
    ).toBe("Done. New total line count: 5.");
    expect(
      await callTool("manage_files", {
        action: "write_lines",
        filename: "plan.txt",
        from: 4,
        to: 4,
        content: "",
      }),
    ).toBe("Done. New total line count: 4.");
    expect(
      await callTool("manage_files", { action: "read_lines", filename: "plan.txt", from: 1, to: 4 }),
    ).toBe("alpha\ninserted\nbeta\nbeta two\n(lines 1-4 of 4 total)");
    expect(readFileSync(plan, "utf8")).toBe("alpha\ninserted\nbeta\nbeta two\n");

    const copy = join(workspace, "drafts", "plan-copy.txt");
    expect(
      await callTool("manage_files", {
        action: "copy",
        source: "plan.txt",
        destination: "drafts/plan-copy.txt",
      }),
    ).toBe(copy);
    expect(readFileSync(copy, "utf8")).toBe(readFileSync(plan, "utf8"));
    const moved = join(workspace, "final.txt");
    expect(
      await callTool("manage_files", {
        action: "move",
        source: "drafts/plan-copy.txt",
        destination: "final.txt",
      }),
    ).toBe(moved);
    expect(existsSync(copy)).toBe(false);
    expect(readFileSync(moved, "utf8")).toBe(readFileSync(plan, "utf8"));
    expect(await callTool("manage_files", { action: "read", filename: "drafts/plan-copy.txt" })).toContain(
      "File not found",
    );

    const bytes = Buffer.from([0x00, 0x01, 0x02, 0xfe, 0xff, 0x89, 0x50]);
    expect(
      await callTool("manage_files", {
        action: "write",
        filename: "blob.bin",
        content: bytes.toString("base64"),
        encoding: "base64",
      }),
    ).toBe(join(workspace, "blob.bin"));
    expect(readFileSync(join(workspace, "blob.bin"))).toEqual(bytes);
    expect(await callTool("manage_files", { action: "read", filename: "blob.bin", encoding: "base64" })).toBe(
      bytes.toString("base64"),
    );
    expect(
      await callTool("manage_files", {
        action: "write",
        filename: "bad.bin",
        content: "not base64!",
        encoding: "base64",
      }),
    ).toContain("'content' is not valid base64.");

    const listed = await callTool("manage_files", { action: "list" });
    expect(listed.split("\n")[0]).toBe(`${workspace}:`);
    const size = Buffer.byteLength(readFileSync(plan));
    expect(listed).toContain(`plan.txt (${size} bytes)`);
    expect(listed).toContain(`final.txt (${size} bytes)`);
    expect(listed).toContain(`blob.bin (${bytes.length} bytes)`);
    expect(listed).not.toContain("plan-copy.txt");
    expect(await callTool("manage_files", { action: "delete", filename: "final.txt" })).toBe(
      "Deleted final.txt.",
    );
    expect(existsSync(moved)).toBe(false);
    expect(await callTool("manage_files", { action: "list" })).not.toContain("final.txt");
  });

  it("removes only old files that no waiting message refers to", async () => {
    // An area of its own: the app's start-up clean-up may still be sweeping its own files.
    const areas = new FileAreas(join(t.env.dir, "files-for-cleanup"));
    await areas.ensure();
    const old = Date.now() / 1000 - 4 * 24 * 3600;
    const oldFile = join(areas.workspace, "old.txt");
    const freshFile = join(areas.workspace, "fresh.txt");
    const referenced = join(areas.uploads, "upload-referenced.txt");
    mkdirSync(areas.pluginOutput("p"), { recursive: true });
    const oldOutput = join(areas.pluginOutput("p"), "out.txt");
    for (const file of [oldFile, freshFile, referenced, oldOutput]) writeFileSync(file, "x");
    for (const file of [oldFile, referenced, oldOutput]) utimesSync(file, old, old);
    const inbox = new InboxStore(t.app.db);
    await t.app.db.query("INSERT INTO inbox (source, payload, status) VALUES ('upload', $1, 'pending')", [
      JSON.stringify({
        attachments: [{ storedPath: referenced, originalFilename: "r", mimeType: "text/plain", size: 1 }],
      }),
    ]);
    expect(await removeOldFiles(areas, inbox, silentLogger)).toBe(2);
    expect(existsSync(oldFile)).toBe(false);
    expect(existsSync(oldOutput)).toBe(false);
    expect(existsSync(freshFile)).toBe(true);
    expect(existsSync(referenced)).toBe(true);
    await t.app.db.query("DELETE FROM inbox WHERE status = 'pending' AND source = 'upload'");
  });
});

describe("db_search through /chat", () => {
  it("finds earlier conversation and rows of the owner's tables", async () => {
    t.fake.enqueue(textTurn("Noted: the locksmith is Karamanlis."));
    await chat(t.app, "The locksmith's name is Karamanlis, remember for the door");
    await t.app.db.query(
      "CREATE TABLE contacts (name text, note text, created_at timestamptz DEFAULT now())",
    );
    await t.app.db.query("INSERT INTO contacts (name, note) VALUES ('Eleni', 'knows a good locksmith')");
    const found = await callTool("db_search", { query: "locksmith" });
    expect(found).toContain("Table: contacts (1 match(es))");
    expect(found).toContain("Eleni");
    expect(found).toMatch(/Messages \(\d+ match\(es\)\):/);
    expect(found).toContain("Karamanlis");
    expect(await callTool("db_search", { query: "zeppelinxyz" })).toBe('No results found for "zeppelinxyz".');
  });
});

describe("the system prompt", () => {
  it("mentions no tool this configuration lacks, and keeps the lines of those it has", async () => {
    t.fake.enqueue(textTurn("hi"));
    const before = t.fake.requests.length;
    await chat(t.app, "hello");
    const body = t.fake.requests[before]?.body as { system: { text: string }[]; tools: { name: string }[] };
    const system = body.system.map((block) => block.text).join("\n");
    const tools = body.tools.map((tool) => tool.name);
    // Nothing of [webSearch], [webFetch], [telegram], [signal] or [coder] is configured here.
    for (const absent of ["web_search", "web_fetch", "send_telegram_message", "send_signal_message"]) {
      expect(tools).not.toContain(absent);
      expect(system).not.toContain(absent);
    }
    expect(system).not.toContain("use the matching send tool");
    expect(system).not.toMatch(/^@/m);
    // Lines of the tools that exist are kept, without their tags.
    expect(tools).toEqual(expect.arrayContaining(["manage_cron", "db_search", "manage_files"]));
    expect(system).toContain(
      "\n- Use manage_cron for reminders and anything that must happen at a given time.",
    );
    expect(system).toContain("\n- Use db_search to find something said or stored earlier");
  });
});
