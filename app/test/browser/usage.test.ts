import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser } from "playwright-core";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { configFor, createTestEnv, type TestEnv } from "../helpers/app.js";
import { raw } from "../helpers/http.js";
import { startProduct, type Product } from "../helpers/product.js";
import {
  describeInBrowser,
  expectNoProblems,
  launchBrowser,
  ownerContext,
  screenshot,
} from "./helpers/browser.js";

/**
 * Usage and budgets in a real browser, against the product (`npm start`): a turn sent from the
 * chat panel appears with its cost on the usage page (table and chart), and once the daily budget
 * is used up the next message is refused with the reason, without a model call.
 */
const DAILY_LIMIT = 0.001;
let browser: Browser;
let fake: FakeLlmServer;
let env: TestEnv;
let app: Product;

describeInBrowser("usage and budgets in Chromium", () => {
  beforeAll(async () => {
    fake = await startFakeAnthropic();
    env = await createTestEnv(configFor(fake, "anthropic", `[budget]\ndaily = ${DAILY_LIMIT}\n`));
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env)]);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await fake?.close();
    await env?.cleanup();
  });

  it("shows a turn's cost on the usage page, then refuses the next message over the budget", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    fake.enqueue(textTurn("Hi there."));
    await page.goto("/");
    await page.fill("#chat-input", "hello");
    await page.click("#chat-send");
    await page.locator(".bubble.assistant", { hasText: "Hi there." }).waitFor();
    // Recording the cost follows the reply.
    await vi.waitFor(async () => {
      const usage = await raw(app.port, "GET", "/api/usage");
      expect(usage.json.budgets.daily.spentUsd).toBeGreaterThan(DAILY_LIMIT);
    });

    await page.goto("/usage");
    const turn = page.locator("#turns tbody tr").first();
    await turn.waitFor();
    const cells = await turn.locator("td").allTextContents();
    // When, source, cost, calls, then the tokens.
    expect(cells[1]).toBe("web");
    expect(cells[3]).toBe("1");
    const cost = cells[2] ?? "";
    expect(cost).toMatch(/^\$0\.\d+$/);
    expect(Number(cost.slice(1))).toBeGreaterThan(0);
    expect(await page.locator("#by-source tbody tr").first().locator("td").first().textContent()).toBe("web");
    // Today's bar is drawn, and its tooltip has the day's cost.
    const today = new Date().toISOString().slice(0, 10);
    const bar = page.locator(`#chart rect[data-day="${today}"]`);
    expect(Number(await bar.getAttribute("height"))).toBeGreaterThan(0);
    expect(await bar.locator("title").textContent()).toContain(cost);
    expect(await page.locator("#chart rect.bar").count()).toBe(30);
    expect(await page.textContent('[data-budget="daily"]')).toContain("Used up");
    expect(await page.textContent('[data-budget="monthly"]')).toContain("no budget set");
    await screenshot(page, "usage");

    await page.goto("/");
    await page.fill("#chat-input", "one more?");
    await page.click("#chat-send");
    const refusal = page.locator(".bubble.assistant", { hasText: "budget" });
    await refusal.waitFor();
    // A refused turn answers its person, marked as a turn that failed.
    expect(await refusal.getAttribute("class")).toContain("failed");
    expect(await refusal.textContent()).toContain("The daily budget of $0.00 is used up");
    expect(fake.requests).toHaveLength(1);
    await screenshot(page, "home-over-budget");
    expectNoProblems(owner);
    await owner.context.close();
  });
});
