import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser, Page } from "playwright-core";
import {
  FAKE_TELEGRAM_TOKEN,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { configFor, createTestEnv, post, type TestEnv } from "../helpers/app.js";
import { raw } from "../helpers/http.js";
import { startProduct, type Product } from "../helpers/product.js";
import {
  describeInBrowser,
  expectNoProblems,
  fitsViewport,
  launchBrowser,
  ownerContext,
  screenshot,
} from "./helpers/browser.js";

/**
 * Details of the admin UI a careful owner notices, in Chromium against the product (`npm start`,
 * Telegram configured without a public address, no subscription login, no subagent): the Home
 * page's cards hold their badges at a desktop's and a phone's width, the Subscription page does
 * not open with an error, People's agent choice says what it is with no subagent yet, Usage's
 * tables show their last column, an address that is not there and a sign-in window closed show
 * pages (not JSON), and every page starts with a "Skip to content" link.
 */
let browser: Browser;
let fake: FakeLlmServer;
let telegram: FakeTelegram;
let env: TestEnv;
let app: Product;

interface Box {
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/** The boxes of every element matching `selector` and of the card holding each (a string: it runs in the page). */
function boxesInCards(page: Page, selector: string): Promise<{ text: string; box: Box; card: Box }[]> {
  return page.evaluate(`[...document.querySelectorAll(${JSON.stringify(selector)})].map((node) => {
    const box = (element) => { const r = element.getBoundingClientRect();
      return { left: r.left, right: r.right, top: r.top, bottom: r.bottom }; };
    return { text: node.textContent, box: box(node), card: box(node.closest(".card")) };
  })`);
}

describeInBrowser("details of the admin UI in Chromium", () => {
  beforeAll(async () => {
    [fake, telegram] = await Promise.all([startFakeAnthropic(), startFakeTelegram()]);
    env = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
      ),
    );
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env)]);
    // Telegram forgets the webhook the start registered: Home shows it in red.
    await vi.waitFor(() => expect(telegram.webhook?.url).toMatch(/\/telegram\/webhook$/), {
      timeout: 20_000,
    });
    await fetch(`${telegram.url}/bot${FAKE_TELEGRAM_TOKEN}/deleteWebhook`, { method: "POST" });
    // One turn from a source with a long name, so Usage's tables have rows.
    fake.enqueue(textTurn("Hello."));
    expect(
      (await post(app.port, "/chat", { message: "hi", source: "a-rather-long-source-name" })).status,
    ).toBe(200);
    await vi.waitFor(async () => {
      const usage = await raw(app.port, "GET", "/api/usage");
      expect(usage.json.bySource.length).toBeGreaterThan(0);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await telegram?.close();
    await fake?.close();
    await env?.cleanup();
  });

  it.each([
    [1280, false],
    [900, false],
    [390, true],
  ])("keeps the Home page's badges and facts inside their cards at %i px", async (width, phone) => {
    const owner = await ownerContext(browser, app.port, { phone });
    const { page } = owner;
    if (!phone) await page.setViewportSize({ width, height: 900 });
    await page.goto("/");
    const badge = page.locator("#channels .badge.bad");
    await badge.waitFor();
    expect(await badge.textContent()).toBe("webhook not registered");
    await page.locator("#services .badge").first().waitFor();
    await page.locator("#checks .badge").first().waitFor();
    const boxes = await boxesInCards(page, "main .card .badge, main .facts dt, main .facts dd");
    expect(boxes.length).toBeGreaterThanOrEqual(10);
    for (const { text, box, card } of boxes) {
      expect(box.left, text).toBeGreaterThanOrEqual(card.left);
      expect(box.right, text).toBeLessThanOrEqual(card.right);
    }
    expect(await fitsViewport(page)).toBe(true);
    await screenshot(page, `home-badges-${width}`);
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("opens the Subscription page without an error when no subscription login is set up", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/settings/subscription");
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).not.toBe("Connecting…");
    const status = (await page.textContent("#status")) ?? "";
    expect(status).not.toContain("did not complete");
    expect(status).toContain("authFile");
    expect(await page.getAttribute("#status", "class")).not.toContain("error");
    // Nothing on the page is shown as an error, and there is no "Start again" for a sign-in never begun.
    expect(await page.locator(".error:visible").count()).toBe(0);
    expect(await page.locator("#again").isVisible()).toBe(false);
    await screenshot(page, "subscription-unset");
    expectNoProblems(owner, [/EventSource|event-stream|ERR_/]);
    await owner.context.close();
  });

  it("names People's agent choice, and says what choosing none does, with no subagent yet", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/people");
    await page.locator("#agents li strong").first().waitFor();
    const select = page.locator('#interlocutor-form select[name="agent_id"]');
    // Labelled on the page, not only for a screen reader.
    const id = await select.getAttribute("id");
    expect(id).toBeTruthy();
    const label = page.locator(`label[for="${id}"]`);
    expect(await label.isVisible()).toBe(true);
    expect(await label.textContent()).toMatch(/agent/i);
    const options = await select.locator("option").allTextContents();
    expect(options).toHaveLength(1);
    expect(options[0]).toMatch(/no agent/i);
    expect((await select.boundingBox())!.width).toBeGreaterThan(60);
    expect(await page.textContent("#interlocutor-form")).toMatch(/create a subagent/i);
    await screenshot(page, "people-no-subagent");

    // Once there is one, it is offered first, and "no agent" stays a choice.
    const created = await post(app.port, "/api/people/agents", {
      action: "create",
      name: "Scheduler",
      system_prompt: "Book meetings.",
    });
    expect(created.status).toBe(200);
    await page.reload();
    await page.locator("#agents li strong", { hasText: "Scheduler" }).waitFor();
    const now = await select.locator("option").allTextContents();
    expect(now[0]).toMatch(/^Scheduler/);
    expect(now.some((text) => /no agent/i.test(text))).toBe(true);
    expectNoProblems(owner);
    await owner.context.close();
  });

  it.each([1280, 1024])("shows Usage's tables whole, their last column included, at %i px", async (width) => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.setViewportSize({ width, height: 900 });
    await page.goto("/usage");
    await page.locator("#by-source tbody tr td").first().waitFor();
    for (const table of ["#by-source", "#by-plugin"]) {
      // The table's last header, whole, inside its box as the page opens: nothing to scroll to.
      const { wrap, last, scrolls } = await page.evaluate<{
        wrap: Box;
        last: Box;
        scrolls: boolean;
      }>(`(() => {
        const table = document.querySelector(${JSON.stringify(table)});
        const box = (element) => { const r = element.getBoundingClientRect();
          return { left: r.left, right: r.right, top: r.top, bottom: r.bottom }; };
        const wrap = table.parentElement;
        return { wrap: box(wrap), last: box(table.querySelector("thead th:last-child")),
          scrolls: wrap.scrollWidth > wrap.clientWidth };
      })()`);
      expect(await page.locator(`${table} thead th:last-child`).textContent()).toBe("Cache write");
      expect(last.right, table).toBeLessThanOrEqual(wrap.right + 0.5);
      expect(scrolls, table).toBe(false);
    }
    expect(await fitsViewport(page)).toBe(true);
    await screenshot(page, `usage-tables-${width}`);
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("shows a page, not JSON, for an address that is not there, with the navigation", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    const answer = await page.goto("/no-such-page");
    expect(answer?.status()).toBe(404);
    expect(await page.textContent("h1")).toBe("Page not found");
    expect(await page.textContent("#error-detail")).toBe("Nothing is at /no-such-page.");
    expect(await page.locator(".topbar nav a").count()).toBeGreaterThanOrEqual(7);
    await screenshot(page, "not-found");
    await Promise.all([page.waitForURL((url) => url.pathname === "/"), page.click("#error-action")]);
    expect(await page.textContent("h1")).toBe("Home");
    // The page's script still gets JSON.
    const json = await page.evaluate<{ status: number; body: string }>(
      `fetch("/api/nothing").then(async (r) => ({ status: r.status, body: await r.text() }))`,
    );
    expect(json).toEqual({ status: 404, body: JSON.stringify({ error: "Not found" }) });
    expectNoProblems(owner, [/status of 404/]);
    await owner.context.close();
  });

  it("shows a page saying what to do when the sign-in window is closed", async () => {
    // No credentials, and the browser's sign-in window cancelled, as a person would (Chromium's
    // own answer to the challenge, through the DevTools protocol).
    const visitor = await ownerContext(browser, app.port, { password: null });
    const { page } = visitor;
    const cdp = await visitor.context.newCDPSession(page);
    cdp.on(
      "Fetch.requestPaused",
      (event) => void cdp.send("Fetch.continueRequest", { requestId: event.requestId }),
    );
    cdp.on(
      "Fetch.authRequired",
      (event) =>
        void cdp.send("Fetch.continueWithAuth", {
          requestId: event.requestId,
          authChallengeResponse: { response: "CancelAuth" },
        }),
    );
    await cdp.send("Fetch.enable", { handleAuthRequests: true });
    const answer = await page.goto("/usage");
    expect(answer?.status()).toBe(401);
    expect(await page.textContent("h1")).toBe("Sign in to continue");
    expect(await page.textContent("#error-detail")).toContain("config.toml");
    expect(await page.getAttribute("#error-action", "href")).toBe("/usage");
    expect(await page.textContent("body")).not.toContain('{"error"');
    // Styled by a sheet anyone may load, so nothing on it asks for the password again.
    expect(await page.evaluate<string>("getComputedStyle(document.querySelector('main')).maxWidth")).toBe(
      "640px",
    );
    expect(await page.locator(".topbar").count()).toBe(0);
    expect(await fitsViewport(page)).toBe(true);
    await screenshot(page, "sign-in-cancelled");
    await visitor.context.close();
  });

  it("starts every page with a Skip to content link, shown when focused, that moves to the page's content", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    for (const path of ["/", "/usage", "/people", "/settings"]) {
      await page.goto(path);
      await page.locator("h1").first().waitFor();
      const skip = page.locator("a.skip-link");
      expect(await skip.textContent()).toBe("Skip to content");
      expect(await skip.getAttribute("href")).toBe("#main");
      // Hidden until focused, and the first thing Tab reaches.
      expect((await skip.boundingBox())?.width ?? 0).toBeLessThanOrEqual(1);
      await page.keyboard.press("Tab");
      expect(await page.evaluate<string>("document.activeElement.className")).toContain("skip-link");
      const shown = await skip.boundingBox();
      expect(shown!.width).toBeGreaterThan(50);
      expect(shown!.y).toBeGreaterThanOrEqual(0);
      await page.keyboard.press("Enter");
      expect(await page.evaluate<string>("document.activeElement.id")).toBe("main");
      // The next Tab goes on from the content, past the navigation and the notifications.
      await page.keyboard.press("Tab");
      expect(
        await page.evaluate<boolean>(
          "!document.querySelector('.topbar').contains(document.activeElement) && !document.querySelector('#notifications').contains(document.activeElement)",
        ),
        path,
      ).toBe(true);
    }
    expectNoProblems(owner, [/EventSource|event-stream|ERR_/]);
    await owner.context.close();
  });
});
