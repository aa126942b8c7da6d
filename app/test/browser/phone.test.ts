import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser, Page } from "playwright-core";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
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
 * Pages that fit a phone, in Chromium, against the product (`npm start`): every page of the
 * navigation reachable from a phone (the Menu button) and from a desktop (the links wrap rather
 * than run off), the usage chart's labels legible and inside it, and the usage tables' cost column
 * in view at a desktop's and a phone's width.
 */
let browser: Browser;
let fake: FakeLlmServer;
let env: TestEnv;
let app: Product;

interface Box {
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/** Runs in the page (a string: the tests are compiled without the DOM's types). */
const boxOf = (selector: string): string =>
  `(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
    return { left: r.left, right: r.right, top: r.top, bottom: r.bottom }; })()`;

async function navLinks(page: Page): Promise<string[]> {
  return page.evaluate<string[]>(
    `[...document.querySelectorAll(".topbar nav a")].map((link) => link.getAttribute("href"))`,
  );
}

describeInBrowser("pages that fit a phone", () => {
  beforeAll(async () => {
    fake = await startFakeAnthropic();
    env = await createTestEnv(configFor(fake));
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env)]);
    // One turn, so the usage page has a cost to show in its tables and chart.
    fake.enqueue(textTurn("Hello."));
    expect((await post(app.port, "/chat", { message: "hi", source: "web" })).status).toBe(200);
    await vi.waitFor(async () => {
      const usage = await raw(app.port, "GET", "/api/usage");
      expect(usage.json.turns.length).toBeGreaterThan(0);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await fake?.close();
    await env?.cleanup();
  });

  it("reaches every page of the navigation from a phone, through the Menu button", async () => {
    const owner = await ownerContext(browser, app.port, { phone: true });
    const { page } = owner;
    await page.goto("/");
    const links = await navLinks(page);
    expect(links.length).toBeGreaterThanOrEqual(7);
    const toggle = page.locator(".menu-toggle");
    for (const href of links) {
      // Closed, the links take no room; the button says so.
      expect(await toggle.getAttribute("aria-expanded")).toBe("false");
      expect(await page.locator(".topbar nav").isVisible()).toBe(false);
      const button = await toggle.boundingBox();
      expect(button?.height).toBeGreaterThanOrEqual(44);
      expect((button?.x ?? -1) + (button?.width ?? 0)).toBeLessThanOrEqual(390);
      await toggle.click();
      expect(await toggle.getAttribute("aria-expanded")).toBe("true");
      const link = page.locator(`.topbar nav a[href="${href}"]`);
      expect(await link.isVisible()).toBe(true);
      // Whole, on the screen, and big enough for a thumb.
      const box = await link.boundingBox();
      expect(box).not.toBeNull();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(390);
      expect(box!.y + box!.height).toBeLessThanOrEqual(844);
      expect(box!.height).toBeGreaterThanOrEqual(44);
      await Promise.all([page.waitForURL((url) => url.pathname === href), link.click()]);
      // Every page has a heading; its data comes after (the live events keep a connection open).
      await page.locator("h1").first().waitFor();
      expect(await fitsViewport(page)).toBe(true);
      // A page without the shared layout (today the provider login) is left by the address bar.
      if ((await page.locator(".topbar").count()) === 0) {
        await page.goto("/");
        continue;
      }
      const shown = `${href} showed ${page.url()}, "${await page.locator("h1").first().textContent()}"`;
      expect(await page.locator(`.topbar nav a[href="${href}"]`).getAttribute("aria-current"), shown).toBe(
        "page",
      );
    }
    // Escape closes the menu, and so does a tap elsewhere.
    await toggle.click();
    await page.keyboard.press("Escape");
    expect(await toggle.getAttribute("aria-expanded")).toBe("false");
    await toggle.click();
    await page.locator("main h1").click();
    expect(await page.locator(".topbar nav").isVisible()).toBe(false);
    await toggle.click();
    await screenshot(page, "phone-menu-open");
    // The provider login page names no icon (the browser asks for /favicon.ico).
    expectNoProblems(owner, [/status of 404/]);
    await owner.context.close();
  });

  it.each([1280, 900])("shows every link of the navigation at %i px, with no Menu button", async (width) => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.setViewportSize({ width, height: 900 });
    await page.goto("/usage");
    expect(await page.locator(".menu-toggle").isVisible()).toBe(false);
    for (const href of await navLinks(page)) {
      const box = await page.locator(`.topbar nav a[href="${href}"]`).boundingBox();
      expect(box, href).not.toBeNull();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width, href).toBeLessThanOrEqual(width);
    }
    expect(await fitsViewport(page)).toBe(true);
    expectNoProblems(owner);
    await owner.context.close();
  });

  it.each([
    [1280, false],
    [390, true],
  ])(
    "keeps the usage tables' cost column in view, and the chart's labels legible, at %i px",
    async (width, phone) => {
      const owner = await ownerContext(browser, app.port, { phone });
      const { page } = owner;
      await page.goto("/usage");
      await page.locator("#turns tbody tr").first().waitFor();
      await page.locator("#chart svg").waitFor();
      expect(await fitsViewport(page)).toBe(true);
      for (const table of ["#by-source", "#by-plugin", "#turns"]) {
        const headers = await page.locator(`${table} thead th`).allTextContents();
        const column = headers.indexOf("Cost") + 1;
        expect(column, table).toBeGreaterThan(0);
        // Its header and a cell, whole, inside the table's own scrolling box and the screen, unscrolled.
        const wrap = await page.evaluate<Box>(
          `(() => { const r = document.querySelector(${JSON.stringify(table)}).parentElement.getBoundingClientRect();
          return { left: r.left, right: r.right, top: r.top, bottom: r.bottom }; })()`,
        );
        // A table with nothing yet has one cell across its row: only its header is checked.
        const cells = [
          `${table} thead th:nth-child(${column})`,
          `${table} tbody tr:not(:has(td[colspan])) td:nth-child(${column})`,
        ];
        for (const cell of cells) {
          if ((await page.locator(cell).count()) === 0) continue;
          const box = await page.evaluate<Box>(boxOf(cell));
          expect(box.left, cell).toBeGreaterThanOrEqual(wrap.left - 0.5);
          expect(box.right, cell).toBeLessThanOrEqual(Math.min(wrap.right, width) + 0.5);
        }
      }
      // The cost follows what names the row.
      expect(await page.locator("#turns thead th").allTextContents()).toEqual([
        "When",
        "Source",
        "Cost",
        "Calls",
        "In",
        "Out",
        "Cache read",
        "Cache write",
      ]);
      const cost = await page.locator(`#turns tbody tr:first-child td:nth-child(3)`).textContent();
      expect(cost).toMatch(/^\$0\.\d+$/);

      // The chart: drawn at the width it is shown at, its labels at least 11 px on screen, inside
      // it, and no two touching.
      const labels = await page.evaluate<{
        svg: Box;
        scale: number;
        texts: (Box & { size: number; text: string })[];
      }>(
        `(() => {
        const svg = document.querySelector("#chart svg");
        const r = svg.getBoundingClientRect();
        const scale = r.width / svg.viewBox.baseVal.width;
        return {
          svg: { left: r.left, right: r.right, top: r.top, bottom: r.bottom },
          scale,
          texts: [...svg.querySelectorAll("text")].map((text) => {
            const b = text.getBoundingClientRect();
            return { left: b.left, right: b.right, top: b.top, bottom: b.bottom, text: text.textContent,
              size: parseFloat(getComputedStyle(text).fontSize) * scale };
          }),
        };
      })()`,
      );
      expect(labels.scale).toBeGreaterThan(0.99);
      expect(labels.texts.length).toBeGreaterThanOrEqual(4);
      for (const text of labels.texts) {
        expect(text.size, text.text).toBeGreaterThanOrEqual(11);
        expect(text.left, text.text).toBeGreaterThanOrEqual(labels.svg.left);
        expect(text.right, text.text).toBeLessThanOrEqual(labels.svg.right);
        expect(text.top, text.text).toBeGreaterThanOrEqual(labels.svg.top);
        expect(text.bottom, text.text).toBeLessThanOrEqual(labels.svg.bottom);
      }
      const days = await page.evaluate<Box[]>(
        `[...document.querySelectorAll("#chart svg text.day")].map((text) => {
        const b = text.getBoundingClientRect();
        return { left: b.left, right: b.right, top: b.top, bottom: b.bottom };
      })`,
      );
      expect(days.length).toBeGreaterThanOrEqual(3);
      // Today is labelled.
      expect(await page.locator("#chart svg text.day").last().textContent()).toBe(
        new Date().toISOString().slice(5, 10),
      );
      for (let index = 1; index < days.length; index++) {
        expect(days[index]!.left).toBeGreaterThanOrEqual(days[index - 1]!.right + 2);
      }
      await screenshot(page, `usage-${width}`);
      expectNoProblems(owner);
      await owner.context.close();
    },
  );
});
