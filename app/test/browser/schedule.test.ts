import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser } from "playwright-core";
import {
  FAKE_TELEGRAM_TOKEN,
  startFakeAnthropic,
  startFakeOpenAI,
  startFakeTelegram,
  textTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { configFor, createTestEnv, type TestEnv } from "../helpers/app.js";
import { tableRows } from "../helpers/explorer.js";
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
 * Pages whose words mean one thing, in a real browser against the product (`npm start`; what it
 * stored is read through the database explorer's API, as the owner would): the Schedule page (the
 * nightly maintenance turns among every cron entry, their next firing, last result and cost,
 * edited and deleted), the Provider subscription page inside the navigation (what "Login" was),
 * the Allowlist showing only the configured channel, and the Usage page saying when the model has
 * no price.
 */
let browser: Browser;
let fake: FakeLlmServer;
let telegram: FakeTelegram;
let env: TestEnv;
let app: Product;

describeInBrowser("schedule, subscription, allowlist and usage words in Chromium", () => {
  beforeAll(async () => {
    [fake, telegram] = await Promise.all([startFakeAnthropic(), startFakeTelegram()]);
    env = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        '[owner]\nname = "Ada"\ntelegram = 4242\n' +
          `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
      ),
    );
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env)]);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await telegram?.close();
    await fake?.close();
    await env?.cleanup();
  });

  it("shows the nightly maintenance turns with next firing, last result and cost; edits and deletes them", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/schedule");
    expect(await page.getAttribute('.topbar nav a[href="/schedule"]', "aria-current")).toBe("page");
    const review = page.locator('[aria-label="nightly-review"]');
    const upkeep = page.locator('[aria-label="daily-maintenance"]');
    await review.waitFor();
    expect(await page.locator("#entries > section").count()).toBe(2);
    expect(await review.locator("h2 .badge").textContent()).toBe("0 3 * * *");
    expect(await review.locator('[data-field="next"]').textContent()).toMatch(/\d/);
    expect(await review.locator('[data-field="last"]').textContent()).toBe("Not fired yet.");
    expect(await review.locator('[data-field="cost"]').textContent()).toBe("Nothing in the last 30 days.");
    expect(await page.textContent("#schedule-timezone")).toBe("UTC");

    // Edit: fire it a few seconds from now (a six-field expression, seconds first).
    const at = new Date(Date.now() + 8_000);
    const expression = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`;
    fake.enqueue(textTurn("Memories merged; nothing needs you."));
    await review.locator("summary", { hasText: "Edit" }).click();
    await review.locator("[name=cronExpression]").fill(expression);
    await review.locator("button", { hasText: "Save" }).click();
    await expect.poll(() => page.textContent("#schedule-status")).toMatch(/^Entry \d+ saved\.$/);
    expect(await review.locator("h2 .badge").textContent()).toBe(expression);

    // It fires; the page shows what it answered and what it cost.
    const id = Number(await review.getAttribute("data-entry"));
    await vi.waitFor(
      async () => {
        const rows = (await tableRows(app, "inbox")).filter((row) => row.source === `cron:${id}`);
        expect(rows.map((row) => row.status)).toEqual(["done"]);
      },
      { timeout: 30_000, interval: 250 },
    );
    await app.quiet();
    await vi.waitFor(async () => {
      const usage = (await tableRows(app, "usage")).filter((row) => row.source === `cron:${id}`);
      expect(usage.length).toBeGreaterThan(0);
    });
    await page.reload();
    await review.waitFor();
    expect(await review.locator('[data-field="last"] .badge').textContent()).toBe("answered");
    await review.locator('[data-field="last"] summary').click();
    expect(await review.locator('[data-field="last"] pre').textContent()).toBe(
      "Memories merged; nothing needs you.",
    );
    const cost = (await review.locator('[data-field="cost"]').textContent()) ?? "";
    expect(cost).toMatch(/^\$\d+\.\d+ over 1 firing in the last 30 days\. The last one: \$\d+\.\d+\.$/);
    expect(cost).not.toContain("$0.00 over");
    expect(await page.textContent("#schedule-total")).toMatch(
      /^Scheduled turns cost \$\d+\.\d+ in the last 30 days/,
    );
    await screenshot(page, "schedule");

    // A bad expression is refused with the reason; the entry stays as it was.
    /** The entry as stored: its expression and note, or nothing once it is gone. */
    const stored = async (entryId: number) =>
      (await tableRows(app, "cron_entries"))
        .filter((row) => row.id === entryId)
        .map((row) => ({ cron_expression: row.cron_expression, note: row.note }));
    const before = await stored(Number(await upkeep.getAttribute("data-entry")));
    expect(before).toHaveLength(1);
    await upkeep.locator("summary", { hasText: "Edit" }).click();
    await upkeep.locator("[name=cronExpression]").fill("every day");
    await upkeep.locator("button", { hasText: "Save" }).click();
    await page.locator("#schedule-error").waitFor({ state: "visible" });
    expect(await page.textContent("#schedule-error")).toContain('"every day" is not a cron expression');
    const upkeepId = Number(await upkeep.getAttribute("data-entry"));
    expect(await stored(upkeepId)).toEqual(before);

    // Delete, after saying yes.
    page.once("dialog", (dialog) => void dialog.accept());
    await upkeep.locator("button", { hasText: "Delete" }).click();
    await expect.poll(() => page.textContent("#schedule-status")).toBe(`Entry ${upkeepId} deleted.`);
    expect(await page.locator("#entries > section").count()).toBe(1);
    expect(await stored(upkeepId)).toHaveLength(0);
    expectNoProblems(owner, [/status of 400/]);
    await owner.context.close();
  });

  it("is the Provider subscription page, with the navigation, where Login was", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/login");
    expect(new URL(page.url()).pathname).toBe("/settings/subscription");
    expect(await page.textContent("h1")).toBe("Provider subscription");
    const link = page.locator('.topbar nav a[href="/settings/subscription"]');
    expect(await link.textContent()).toBe("Subscription");
    expect(await link.getAttribute("aria-current")).toBe("page");
    expect(await page.locator(".topbar nav a", { hasText: /^Login$/ }).count()).toBe(0);
    expect(await page.textContent('[role="note"]')).toContain("forbid using the tokens of a subscription");
    // The sign-in flow's events reach the page.
    await expect.poll(() => page.textContent("#status"), { timeout: 15_000 }).not.toBe("Connecting…");
    await screenshot(page, "subscription");
    expectNoProblems(owner, [/EventSource|event-stream|ERR_/]);
    await owner.context.close();
  });

  it("shows only the configured channel on the Allowlist, and keeps the others' lists when saving", async () => {
    // Entries kept for channels this configuration does not have (set through the API).
    const stored = await raw(app.port, "PUT", "/api/settings/allowlist", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        signal: ["+15555550199"],
        telegram: [],
        whatsapp: [],
        email: ["ann@example.com"],
        notes: { "+15555550199": "Sam", "ann@example.com": "Ann" },
      }),
    });
    expect(stored.status).toBe(200);
    expect(stored.json.channels).toEqual(["telegram"]);
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/settings/allowlist");
    const telegramList = page.locator('[data-service="telegram"]');
    await telegramList.locator("[data-owner]").waitFor();
    expect(await page.locator("[data-service]").count()).toBe(1);
    expect(await page.locator("#services h2").allTextContents()).toEqual(["Telegram"]);
    // A bad entry is refused with the reason, and nothing is stored.
    await page.click('[data-add="telegram"]');
    await telegramList.locator("[data-entry]:not([data-owner]) [name=identifier]").last().fill("not-a-chat");
    await page.click("#allowlist-save");
    await page.locator("#allowlist-error").waitFor({ state: "visible" });
    expect(await page.textContent("#allowlist-error")).toBe('Invalid telegram entry: "not-a-chat"');
    await telegramList.locator("[data-entry]:not([data-owner]) button").last().click();
    await page.click('[data-add="telegram"]');
    await telegramList.locator("[data-entry]:not([data-owner]) [name=identifier]").last().fill("123456789");
    await telegramList.locator("[data-entry]:not([data-owner]) [name=note]").last().fill("Bob");
    await page.click("#allowlist-save");
    await expect.poll(() => page.textContent("#allowlist-status")).toBe("Saved.");
    await screenshot(page, "allowlist-configured");
    await page.reload();
    await telegramList.locator("[data-entry]:not([data-owner])").waitFor();
    expect(await telegramList.locator("[name=note]").last().inputValue()).toBe("Bob");
    const after = await raw(app.port, "GET", "/api/settings/allowlist");
    expect(after.json.allowlist).toMatchObject({
      telegram: [4242, 123456789],
      signal: ["+15555550199"],
      email: ["ann@example.com"],
      notes: { "123456789": "Bob", "+15555550199": "Sam", "ann@example.com": "Ann" },
    });
    expectNoProblems(owner, [/status of 400/]);
    await owner.context.close();
  });

  it("says on the Usage page when the model has no price, and not when it has one", async () => {
    const owner = await ownerContext(browser, app.port);
    await owner.page.goto("/usage");
    await owner.page.locator("#by-source").waitFor();
    await owner.page.waitForLoadState("networkidle");
    expect(await owner.page.locator("#unpriced").isVisible()).toBe(false);
    await owner.context.close();

    // A custom endpoint serving a model pi-ai does not list, with no cost in config.toml.
    const local = await startFakeOpenAI();
    const localEnv = await createTestEnv(configFor(local, "openai"));
    const localApp = await startProduct(localEnv);
    try {
      const usage = await raw(localApp.port, "GET", "/api/usage");
      expect(usage.json.model).toEqual({ id: "fake-model", priced: false });
      const visitor = await ownerContext(browser, localApp.port);
      await visitor.page.goto("/usage");
      const note = visitor.page.locator("#unpriced");
      await note.waitFor();
      expect(await note.textContent()).toContain("Your model (fake-model) has no price");
      expect(await note.textContent()).toContain("set cost in config.toml");
      await screenshot(visitor.page, "usage-unpriced");
      expectNoProblems(visitor);
      await visitor.context.close();
    } finally {
      await localApp.stop();
      await local.close();
      await localEnv.cleanup();
    }
  }, 120_000);

  it.each(["/schedule", "/settings/subscription"])("fits a phone: %s", async (path) => {
    const owner = await ownerContext(browser, app.port, { phone: true });
    await owner.page.goto(path);
    await owner.page.locator("h1").waitFor();
    expect(await fitsViewport(owner.page)).toBe(true);
    await owner.context.close();
  });
});
