import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { serveDirectory, textTurn, toolTurn, type FileServer } from "@stavrobot/common/test-support";
import { PASSWORD, chat, configFor, post, useTestApp } from "./helpers/app.js";

const FIXTURES = join(import.meta.dirname, "fixtures", "skills");

/*
 * The owner installs a skill page by URL through the assistant, approves it on the owner API, and a
 * scripted model follows it (tables and a page created); requests that do not need it carry only
 * its name and description.
 */
const t = useTestApp({
  config: (fake) => configFor(fake, "anthropic", "[skills]\nallowPrivateSources = true\n"),
});
let site: FileServer;
let siteDir: string;

beforeAll(async () => {
  siteDir = mkdtempSync(join(tmpdir(), "skills-agent-site-"));
  copyFileSync(join(FIXTURES, "reading-log.md"), join(siteDir, "reading-log.md"));
  site = await serveDirectory(siteDir);
});

afterAll(async () => {
  await site.close();
  rmSync(siteDir, { recursive: true, force: true });
});

const systemOf = (index: number): string => JSON.stringify(t.fake.requests[index]?.body.system ?? "");

describe("a skill through the agent", () => {
  it("is installed by URL, waits for the owner, then is followed when a request calls for it", async () => {
    const url = `${site.url}/reading-log.md`;
    t.fake.enqueue(
      toolTurn("manage_skills", { action: "install", url }),
      toolTurn("manage_skills", { action: "read", name: "reading-log" }),
      textTurn("Installed; it waits for your approval."),
    );
    let before = t.fake.requests.length;
    expect((await chat(t.app, `Install the skill at ${url}`)).status).toBe(200);
    expect(t.fake.requests[before + 1]?.lastUserText).toContain("It waits for the owner's approval");
    // The model cannot read it before the owner approves, nor does its prompt list it.
    expect(t.fake.requests[before + 2]?.lastUserText).toContain(
      "waits for the owner's approval (on the Skills page)",
    );
    expect(systemOf(before + 2)).not.toContain("reading-log");

    // The owner hears of it in the web's notifications.
    const notified = await fetch(`http://127.0.0.1:${t.app.port}/api/notifications`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    const { notifications } = (await notified.json()) as {
      notifications: { source: string; response: string }[];
    };
    expect(notifications.find((notice) => notice.source === "skills")?.response).toBe(
      `The skill "reading-log" (version 3) from ${url} waits for your approval on the Skills page (/settings/skills).`,
    );

    // The model has no way to approve: only the owner's API does.
    const refused = await post(t.app.port, "/api/settings/skills/approve", { name: "reading-log" }, null);
    expect(refused.status).toBe(401);
    const listed = await fetch(`http://127.0.0.1:${t.app.port}/api/settings/skills`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    const { skills } = (await listed.json()) as {
      skills: { name: string; status: string; version: string }[];
    };
    expect(skills).toMatchObject([{ name: "reading-log", status: "pending", version: "3" }]);
    const approved = await post(t.app.port, "/api/settings/skills/approve", { name: "reading-log" });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ skill: { status: "approved", approvedVersion: "3" } });
    const unknown = await post(t.app.port, "/api/settings/skills/approve", { name: "nothing-here" });
    expect(unknown.status).toBe(404);
    const bad = await post(t.app.port, "/api/settings/skills/approve", { name: "Bad Name" });
    expect(bad.status).toBe(400);

    // A request that does not need it carries its name and description only.
    t.fake.enqueue(textTurn("Sunny."));
    before = t.fake.requests.length;
    expect((await chat(t.app, "How is the weather?")).status).toBe(200);
    const system = systemOf(before);
    expect(system).toContain(
      "- reading-log: Keep a list of books read and being read, with a page that shows them.",
    );
    expect(system).not.toContain("Create the tables");

    // A request that calls for it: the model reads it and follows its steps.
    t.fake.enqueue(
      toolTurn("manage_skills", { action: "read", name: "reading-log" }),
      toolTurn("execute_sql", {
        query:
          "CREATE TABLE IF NOT EXISTS books (id serial PRIMARY KEY, title text, author text);" +
          "CREATE TABLE IF NOT EXISTS readings (id serial PRIMARY KEY, book_id integer REFERENCES books, started date, finished date)",
      }),
      toolTurn("manage_pages", {
        action: "upsert",
        path: "reading",
        mimetype: "text/html",
        content: "<h1>Reading</h1>",
        queries: {
          books:
            "SELECT b.title, b.author, max(r.started) AS started FROM books b LEFT JOIN readings r ON r.book_id = b.id GROUP BY b.id ORDER BY started DESC NULLS LAST",
        },
      }),
      textTurn("Your reading log is ready at /pages/reading."),
    );
    before = t.fake.requests.length;
    const answer = await chat(t.app, "Set up my reading log");
    expect(answer.status).toBe(200);
    const read = t.fake.requests[before + 1]?.lastUserText ?? "";
    expect(read).toContain(`Skill "reading-log" (SKILL.md), installed from ${url}, version 3`);
    expect(read).toContain("## Step 1: Create the tables");
    expect(t.fake.requests[before + 3]?.lastUserText).toBe("Page created at /pages/reading");
    const tables = await t.app.db.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_name IN ('books', 'readings') ORDER BY table_name",
    );
    expect(tables.rows.map((row) => row.table_name)).toEqual(["books", "readings"]);
    const page = await t.app.db.query("SELECT path FROM pages WHERE path = 'reading'");
    expect(page.rows).toHaveLength(1);

    // Disabled by the owner: gone from the prompt at once.
    expect((await post(t.app.port, "/api/settings/skills/disable", { name: "reading-log" })).status).toBe(
      200,
    );
    t.fake.enqueue(textTurn("ok"));
    before = t.fake.requests.length;
    await chat(t.app, "hello");
    expect(systemOf(before)).not.toContain("reading-log");
  });

  it("is installed, viewed, approved as seen and removed by the owner on the API", async () => {
    const url = `${site.url}/reading-log.md`;
    expect((await post(t.app.port, "/api/settings/skills/remove", { name: "reading-log" })).status).toBe(200);
    const installed = await post(t.app.port, "/api/settings/skills/install", { url });
    expect(installed.status).toBe(200);
    expect(installed.body).toMatchObject({ name: "reading-log", skill: { status: "pending", source: url } });
    const viewed = await fetch(`http://127.0.0.1:${t.app.port}/api/settings/skills/reading-log`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    const view = (await viewed.json()) as { text: string; files: unknown[]; skill: { hash: string } };
    expect(view.text).toContain("title: Reading log");
    expect(view.files).toEqual([]);
    const stale = await post(t.app.port, "/api/settings/skills/approve", {
      name: "reading-log",
      hash: "a".repeat(64),
    });
    expect(stale.status).toBe(409);
    const approved = await post(t.app.port, "/api/settings/skills/approve", {
      name: "reading-log",
      hash: view.skill.hash,
    });
    expect(approved.body).toMatchObject({ skill: { status: "approved" } });
    expect((await post(t.app.port, "/api/settings/skills/install", { url: "ftp://x" })).status).toBe(400);
    expect((await post(t.app.port, "/api/settings/skills/enable", { name: "reading-log" })).status).toBe(400);
    expect((await post(t.app.port, "/api/settings/skills/remove", { name: "reading-log" })).body).toEqual({
      removed: "reading-log",
    });
    const missing = await fetch(`http://127.0.0.1:${t.app.port}/api/settings/skills/reading-log`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    expect(missing.status).toBe(404);
  });

  it("serves the Skills page", async () => {
    const page = await fetch(`http://127.0.0.1:${t.app.port}/settings/skills`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('src="/assets/js/skills.js"');
  });
});
