import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser } from "playwright-core";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { PASSWORD, chat, handOver } from "../helpers/app.js";
import { tableRows } from "../helpers/explorer.js";
import { freePort } from "../helpers/process.js";
import {
  describeInBrowser,
  expectNoProblems,
  fitsViewport,
  launchBrowser,
  ownerContext,
  screenshot,
} from "./helpers/browser.js";
import { startAdminFixture, type AdminFixture } from "./helpers/fixture.js";

/**
 * The admin UI in a real browser, against the product (`npm start`): logging in, the home page
 * (status, the chat with Markdown and /stop), the notifications kept while no page was open, the
 * allowlist, the database explorer, and every page at a phone's size.
 */
let browser: Browser;
let t: AdminFixture;

describeInBrowser("admin pages in Chromium", () => {
  beforeAll(async () => {
    [browser, t] = await Promise.all([
      launchBrowser(),
      // The python-runner is told to be where nothing answers: a sibling that is down.
      startAdminFixture('[owner]\nname = "Ada"\ntelegram = 4242\n', {
        env: { PYTHON_RUNNER_URL: `http://127.0.0.1:${await freePort()}` },
      }),
    ]);
  });

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("asks for the password, and opens with it", async () => {
    // Without the password, or with a wrong one, the browser gets the challenge and never the page.
    for (const password of [null, "wrong-password"]) {
      const stranger = await ownerContext(browser, t.app.port, { password });
      // Chromium either shows the 401 or gives up on the challenge; either way, no page.
      const outcome = await stranger.page.goto("/").then(
        (response) => String(response?.status()),
        (error: Error) => error.message,
      );
      expect(outcome).toMatch(/^401$|ERR_INVALID_AUTH_CREDENTIALS/);
      expect(await stranger.page.locator("#chat-form").count()).toBe(0);
      const challenge = await stranger.context.request.get("/");
      expect(challenge.status()).toBe(401);
      expect(challenge.headers()["www-authenticate"]).toMatch(/^Basic realm="stavrobot"/);
      expect(await challenge.text()).toBe('{"error":"Unauthorized"}');
      await stranger.context.close();
    }
    const owner = await ownerContext(browser, t.app.port);
    const response = await owner.page.goto("/");
    expect(response?.status()).toBe(200);
    // The first status asks each sibling: npm start may be starting one (the python-runner) meanwhile.
    await expect
      .poll(() => owner.page.textContent("#services"), { timeout: 20_000 })
      .toContain("plugin-runner");
    expect(await owner.page.textContent("h1")).toBe("Home");
    await owner.context.close();
  });

  it("shows the services, channels, queue and messages on the home page", async () => {
    const owner = await ownerContext(browser, t.app.port);
    await owner.page.goto("/");
    const runner = owner.page.locator('[data-service="plugin-runner"]');
    await expect.poll(() => runner.textContent()).toContain("up");
    expect(await owner.page.locator('[data-service="python-runner"]').textContent()).toContain("down");
    expect(await owner.page.textContent("#channels")).toContain("not configured");
    expect(await owner.page.textContent("#queue")).toContain("idle");
    // The doctor's checks: the python-runner down, with what to do; the provider's key accepted.
    const python = owner.page.locator('[data-check="python-runner"]');
    await expect.poll(() => python.textContent()).toContain("failing");
    expect(await python.textContent()).toContain("→ npm start restarts it by itself");
    expect(await owner.page.locator('[data-check="provider"]').textContent()).toContain(
      "the key is accepted",
    );
    expect(await owner.page.textContent("#checks-summary")).toBe("1 failing");
    await screenshot(owner.page, "home");
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("lists what arrived while the page was closed, marks it seen, and keeps it until dismissed", async () => {
    t.fake.enqueue(textTurn("The radar shows **rain** at 17:00."));
    const accepted = await handOver(t.app, { source: "plugin:radar/scan", message: "rain at 17:00" });
    expect(accepted.status).toBe(202);
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 15_000 });
    await t.app.quiet();
    const owner = await ownerContext(browser, t.app.port);
    await owner.page.goto("/people");
    const kept = owner.page.locator("#notifications [data-notification]");
    await kept.waitFor();
    expect(await kept.locator(".notification-title").textContent()).toMatch(
      /^Plugin radar\/scan · rain at 17:00 /,
    );
    expect(await kept.locator("p strong").textContent()).toBe("rain");
    // Shown on a visible page: seen, so no console and no reply shows it again.
    const pending = async () => {
      const response = await fetch(`http://127.0.0.1:${t.app.port}/api/answers/pending`, {
        headers: { Authorization: `Basic ${Buffer.from(`o:${PASSWORD}`).toString("base64")}` },
      });
      return ((await response.json()) as { answers: unknown[] }).answers;
    };
    await vi.waitFor(async () => expect(await pending()).toEqual([]), { timeout: 15_000 });
    // Still listed on the next page, until the owner dismisses it.
    await owner.page.goto("/");
    await kept.waitFor();
    await kept.getByRole("button", { name: /^Dismiss/ }).click();
    await owner.page.locator("#notifications").waitFor({ state: "hidden" });
    await owner.page.reload();
    await expect.poll(() => owner.page.textContent("#live-status")).toBe("Live");
    expect(await owner.page.locator("#notifications").isHidden()).toBe(true);
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("chats: a retry of the provider is said as the CLI says it, then the reply", async () => {
    t.fake.reset();
    // The provider's client tries each request 3 times itself before the queue hears of a failure.
    const overloaded = {
      content: [],
      error: {
        status: 529,
        body: { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
      },
    };
    t.fake.enqueue(overloaded, overloaded, overloaded, textTurn("Back again."));
    const owner = await ownerContext(browser, t.app.port);
    await owner.page.goto("/");
    // The waiting bubble's words change as the turn goes: each is recorded (strings run in the page).
    await owner.page.evaluate(
      "window.said = []; new MutationObserver(() => document.querySelectorAll('.bubble.assistant.pending')" +
        ".forEach((b) => window.said.push(b.textContent))).observe(document.body, " +
        "{ subtree: true, childList: true, characterData: true })",
    );
    await owner.page.fill("#chat-input", "are you there?");
    await owner.page.click("#chat-send");
    await owner.page
      .locator(".bubble.assistant:not(.pending):not(.history)", { hasText: "Back again." })
      .waitFor();
    const said = (await owner.page.evaluate("window.said")) as string[];
    expect(said.join("\n")).toMatch(/Overloaded.*\. Trying again (now|in \d+ s) \(retry 1 of \d\)…/);
    await owner.context.close();
  });

  it("chats: the reply is Markdown, raw HTML is text, unsafe links are not links", async () => {
    t.fake.reset();
    t.fake.enqueue(
      textTurn(
        "**Bold** and [a site](https://example.com) and [bad](javascript:alert(1)) and " +
          '<img src=x onerror="window.hacked=1"> and <b>raw</b>\n\n- one\n- two',
      ),
    );
    const owner = await ownerContext(browser, t.app.port);
    await owner.page.goto("/");
    await owner.page.fill("#chat-input", "Hello *there*");
    await owner.page.click("#chat-send");
    const reply = owner.page.locator(".bubble.assistant:not(.pending):not(.history)").last();
    await reply.locator("strong").waitFor();
    expect(await reply.locator("strong").textContent()).toBe("Bold");
    expect(await reply.locator("li").allTextContents()).toEqual(["one", "two"]);
    expect(await reply.locator('a[href="https://example.com"]').getAttribute("rel")).toBe(
      "noopener noreferrer",
    );
    expect(await reply.locator("a").count()).toBe(1);
    expect(await reply.locator("img, b").count()).toBe(0);
    expect(await reply.textContent()).toContain("<b>raw</b>");
    // A string: it runs in the page, and the tests are compiled without the DOM's types.
    expect(await owner.page.evaluate("typeof window.hacked")).toBe("undefined");
    // The user's own text is shown as typed, not as Markdown.
    expect(await owner.page.locator(".bubble.user").last().textContent()).toBe("Hello *there*");
    expect(t.fake.requests[0]!.lastUserText).toContain("Source: web");
    await screenshot(owner.page, "home-chat");
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("stops a running turn with the Stop button", async () => {
    t.fake.reset();
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    t.fake.enqueue({ ...textTurn("too late"), gate });
    const owner = await ownerContext(browser, t.app.port);
    await owner.page.goto("/");
    await owner.page.fill("#chat-input", "take your time");
    await owner.page.click("#chat-send");
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 15_000 });
    await owner.page.locator("#chat-stop").click();
    await owner.page.locator(".bubble.note", { hasText: "Aborted." }).waitFor();
    release();
    await owner.page.locator("#chat-stop").waitFor({ state: "hidden" });
    expect(await owner.page.locator(".bubble.assistant").allTextContents()).not.toContain("too late");
    await t.app.quiet();
    await owner.context.close();
  });

  it("shows in the waiting bubble what the turn does: the tool it runs, then the text as it comes", async () => {
    t.fake.reset();
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    t.fake.enqueue(toolTurn("execute_sql", { query: "SELECT 1 AS one" }), {
      ...textTurn("Counted **one** row."),
      gate,
    });
    const owner = await ownerContext(browser, t.app.port);
    await owner.page.goto("/");
    await owner.page.fill("#chat-input", "count the rows");
    await owner.page.click("#chat-send");
    const pending = owner.page.locator(".bubble.assistant.pending");
    await expect.poll(() => pending.textContent()).toBe("Running execute_sql…");
    release();
    const reply = owner.page.locator(".bubble.assistant:not(.pending):not(.history)").last();
    await reply.locator("strong").waitFor();
    expect((await reply.textContent())?.trim()).toBe("Counted one row.");
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("shows no allowlist to edit while no channel is configured, and says how to add one", async () => {
    // This configuration has no [telegram] or [signal] section (the editing itself is tested with a
    // configured channel in schedule.test.ts).
    const owner = await ownerContext(browser, t.app.port);
    const { page } = owner;
    await page.goto("/settings/allowlist");
    await page.locator("#no-channels").waitFor();
    expect(await page.textContent("#no-channels")).toContain("No channel is configured");
    expect(await page.locator("[data-service]").count()).toBe(0);
    expect(await page.locator("#allowlist-save").isVisible()).toBe(false);
    await screenshot(page, "allowlist");
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("browses, sorts and pages a table, and shows a row in full", async () => {
    // The model makes the table with its own SQL tool.
    t.fake.reset();
    t.fake.enqueue(
      toolTurn("execute_sql", {
        query: `CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, body TEXT);
          INSERT INTO notes SELECT n, 'note ' || lpad(n::text, 3, '0'), repeat('long text ', 60) || n
          FROM generate_series(1, 120) AS n`,
      }),
      textTurn("Your notes are in."),
    );
    expect((await chat(t.app, "keep 120 notes")).body.response).toBe("Your notes are in.");
    expect(t.fake.requests[1]!.lastUserText).toContain("rowCount: 120");
    const owner = await ownerContext(browser, t.app.port);
    const { page } = owner;
    await page.goto("/explorer");
    await page.click('[data-table="notes"]');
    await expect.poll(() => page.textContent("#page-info")).toBe("1–50 of 120");
    expect(page.url()).toContain("?table=notes");
    const firstId = () => page.locator("#grid-body tr").first().locator("td").first().textContent();
    expect(await firstId()).toBe("1");
    await page.click('[data-column="id"]');
    await expect.poll(firstId).toBe("120");
    expect(await page.getAttribute('th:has([data-column="id"])', "aria-sort")).toBe("descending");
    await page.click('[data-column="title"]');
    await expect.poll(firstId).toBe("1");
    await page.click("#next-page");
    await expect.poll(() => page.textContent("#page-info")).toBe("51–100 of 120");
    expect(await firstId()).toBe("51");
    await screenshot(page, "explorer");
    await page.locator("#grid-body tr").first().click();
    const dialog = page.locator("#row-dialog");
    await dialog.waitFor({ state: "visible" });
    expect(await dialog.locator("pre").nth(2).textContent()).toBe(`${"long text ".repeat(60)}51`);
    await screenshot(page, "explorer-row");
    await page.click("#row-close");
    await dialog.waitFor({ state: "hidden" });
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("shows people and agents, creates both from the page, and reads a conversation", async () => {
    const owner = await ownerContext(browser, t.app.port);
    const { page } = owner;
    await page.goto("/people");
    await expect.poll(() => page.textContent("#interlocutors")).toContain("Ada");
    expect(await page.textContent("#agents")).toContain("main (ID: 1)");
    await page.fill("#agent-form [name=name]", "dentist booker");
    await page.fill("#agent-form [name=system_prompt]", "Book a dentist appointment for the owner.");
    await page.fill("#agent-form [name=allowed_tools]", "send_telegram_message, execute_sql");
    await page.click("#agent-save");
    await page.locator("#people-error").waitFor({ state: "visible" });
    expect(await page.textContent("#people-error")).toContain("invalid allowed_tools entries: execute_sql");
    await page.fill("#agent-form [name=allowed_tools]", "send_telegram_message");
    await page.click("#agent-save");
    await expect.poll(() => page.textContent("#agents")).toContain("dentist booker (ID: 2)");
    await page.fill("#interlocutor-form [name=display_name]", "Dentist");
    await page.fill("#interlocutor-form [name=identifier]", "777");
    await page.selectOption("#interlocutor-form [name=agent_id]", "2");
    await page.click("#interlocutor-form button[type=submit]");
    await expect.poll(() => page.textContent("#interlocutors")).toContain("telegram 777");
    const identities = await tableRows(t.app, "interlocutor_identities");
    const rows = (await tableRows(t.app, "interlocutors"))
      .filter((person) => person.display_name === "Dentist")
      .flatMap((person) =>
        identities
          .filter((identity) => identity.interlocutor_id === person.id)
          .map((identity) => ({
            display_name: person.display_name,
            agent_id: person.agent_id,
            identifier: identity.identifier,
          })),
      );
    expect(rows).toEqual([{ display_name: "Dentist", agent_id: 2, identifier: "777" }]);
    await page.locator("#agents li", { hasText: "main (ID: 1)" }).getByText("Read conversation").click();
    await expect.poll(() => page.textContent("#conversation-title")).toBe("Conversation of main (ID: 1)");
    await screenshot(page, "people");
    expectNoProblems(owner, [/status of 400/]);
    await owner.context.close();
  });

  it.each([
    ["/", "home"],
    ["/people", "people"],
    ["/settings", "settings"],
    ["/settings/plugins", "plugins"],
    ["/settings/allowlist", "allowlist"],
    ["/explorer?table=notes", "explorer"],
    ["/usage", "usage"],
  ])("fits a phone: %s", async (path, name) => {
    const owner = await ownerContext(browser, t.app.port, { phone: true, dark: name === "home" });
    const { page } = owner;
    await page.goto(path);
    await page.waitForLoadState("networkidle");
    expect(await fitsViewport(page)).toBe(true);
    // Touch-sized navigation, behind the Menu button (phone.test.ts follows every link).
    const menu = await page.locator(".menu-toggle").boundingBox();
    expect(menu?.height).toBeGreaterThanOrEqual(44);
    if (name === "explorer") {
      expect(await page.locator(".table-list").isVisible()).toBe(false);
      expect(await page.locator("#table-select").inputValue()).toBe("notes");
    }
    await screenshot(page, `phone-${name}${name === "home" ? "-dark" : ""}`);
    expectNoProblems(owner);
    await owner.context.close();
  });
});
