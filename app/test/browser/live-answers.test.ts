import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser } from "playwright-core";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { PASSWORD, chat } from "../helpers/app.js";
import {
  describeInBrowser,
  expectNoProblems,
  launchBrowser,
  ownerContext,
  screenshot,
  type OwnerContext,
} from "./helpers/browser.js";
import { startAdminFixture, type AdminFixture } from "./helpers/fixture.js";

/**
 * An owner without Telegram or Signal, with the home page open: a reminder the model set with
 * `manage_cron` appears in the chat as it fires, raises a browser notification while the owner
 * looks elsewhere (only once they allowed it, asked on a button), and is marked seen once they look.
 */
let browser: Browser;
let t: AdminFixture;

/**
 * Runs in the page before its own scripts: lets the test say whether the owner is looking at the
 * page (what `document.visibilityState` and `hasFocus()` answer), and records every notification
 * the page raises and every time it asks for leave to, through the browser's own API.
 */
const OBSERVER = `(() => {
  let looking = true;
  Object.defineProperty(Document.prototype, "visibilityState", {
    configurable: true,
    get: () => (looking ? "visible" : "hidden"),
  });
  Document.prototype.hasFocus = () => looking;
  window.__look = (value) => {
    looking = value;
    document.dispatchEvent(new Event("visibilitychange"));
  };
  window.__notifications = [];
  window.__asked = 0;
  const Real = window.Notification;
  window.Notification = class extends Real {
    constructor(title, options) {
      super(title, options);
      window.__notifications.push({ title, body: options.body, tag: options.tag });
    }
  };
  const ask = Real.requestPermission.bind(Real);
  window.Notification.requestPermission = () => {
    window.__asked++;
    return ask();
  };
})();`;

async function openHome(options: { allowNotifications: boolean }): Promise<OwnerContext> {
  const owner = await ownerContext(browser, t.app.port);
  if (options.allowNotifications) await owner.context.grantPermissions(["notifications"]);
  await owner.context.addInitScript(OBSERVER);
  await owner.page.goto("/");
  await expect.poll(() => owner.page.textContent("#live-status")).toBe("Live");
  return owner;
}

/** The owner asks (from elsewhere) for a reminder the model sets to fire in a moment. */
async function remind(note: string, text: string): Promise<void> {
  t.fake.enqueue(
    toolTurn("manage_cron", { action: "create", note, fire_at: new Date(Date.now() + 1_500).toISOString() }),
    textTurn("Scheduled."),
    textTurn(text),
  );
  expect((await chat(t.app, `remind me to ${note}`)).body.response).toContain("Scheduled.");
}

async function pending(): Promise<{ id: number; response: string }[]> {
  const response = await fetch(`http://127.0.0.1:${t.app.port}/api/answers/pending`, {
    headers: { Authorization: basicAuthHeader(PASSWORD) },
  });
  return ((await response.json()) as { answers: { id: number; response: string }[] }).answers;
}

describeInBrowser("answers kept for the owner, live on the home page", () => {
  beforeAll(async () => {
    [browser, t] = await Promise.all([launchBrowser(), startAdminFixture()]);
  });

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("shows a reminder as it fires, notifies while the owner looks elsewhere, and marks it seen when they look", async () => {
    const owner = await openHome({ allowNotifications: true });
    const { page } = owner;
    // Already allowed: nothing to ask.
    expect(await page.locator("#notify").isHidden()).toBe(true);
    const title = await page.title();
    await page.evaluate("window.__look(false)");
    await remind("water the plants", "Time to **water** the plants!");
    const kept = page.locator(".bubble.kept");
    await kept.waitFor({ timeout: 15_000 });
    expect(await kept.locator(".kept-from").textContent()).toBe("Reminder · water the plants");
    expect(await kept.locator("strong").textContent()).toBe("water");
    // No "while you were away": it came while the page was open.
    expect(await page.locator(".bubble.note").count()).toBe(0);
    const [answer] = await pending();
    expect(await page.evaluate("window.__notifications")).toEqual([
      { title: "Stavrobot · Reminder", body: "Time to water the plants!", tag: `answer-${answer?.id}` },
    ]);
    expect(await page.title()).toBe(`(1) ${title}`);
    // Not seen while the owner looks elsewhere: another console would still show it.
    expect(answer?.response).toBe("Time to **water** the plants!");
    await page.evaluate("window.__look(true)");
    await vi.waitFor(async () => expect(await pending()).toEqual([]));
    expect(await page.title()).toBe(title);
    await screenshot(page, "home-live-answer");
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("asks for notifications only when the button is pressed, and carries on quietly when refused", async () => {
    const owner = await openHome({ allowNotifications: false });
    const { page } = owner;
    const notify = page.locator("#notify");
    expect(await notify.isVisible()).toBe(true);
    expect(await page.evaluate("window.__asked")).toBe(0);
    // The browser refuses (headless Chromium says "denied"): the button goes, nothing else changes.
    await notify.click();
    await notify.waitFor({ state: "hidden" });
    expect(await page.evaluate("window.__asked")).toBe(1);
    expect(await page.evaluate("Notification.permission")).toBe("denied");
    await page.evaluate("window.__look(false)");
    await remind("call the bank", "Call the bank before noon.");
    await page
      .locator(".bubble.kept", { hasText: "Call the bank before noon." })
      .waitFor({ timeout: 15_000 });
    expect(await page.evaluate("window.__notifications")).toEqual([]);
    await page.evaluate("window.__look(true)");
    await vi.waitFor(async () => expect(await pending()).toEqual([]));
    // The chat works as before.
    t.fake.enqueue(textTurn("Anything else?"));
    await page.fill("#chat-input", "thanks");
    await page.click("#chat-send");
    await page.locator(".bubble.assistant:not(.pending):not(.kept)", { hasText: "Anything else?" }).waitFor();
    expectNoProblems(owner);
    await owner.context.close();
  });
});
