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
 * An owner without Telegram or Signal, with a page open (any page): a reminder the model set with
 * `manage_cron` is listed as it fires, in the owner's words, raises a browser notification while
 * the owner looks elsewhere (only once they allowed it, asked on a button), is marked seen once
 * they look, stays listed over a reload and in another browser until dismissed, and then leaves
 * every page at once. The home page's chat shows the recent conversation again after a reload.
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

/** Opens a page and waits until it follows the live events (it then reads the list). */
async function openPage(path: string, options: { allowNotifications: boolean }): Promise<OwnerContext> {
  const owner = await ownerContext(browser, t.app.port);
  if (options.allowNotifications) await owner.context.grantPermissions(["notifications"]);
  await owner.context.addInitScript(OBSERVER);
  await followingLive(owner, () => owner.page.goto(path));
  return owner;
}

/** Does `action` (a load) and waits until the page read the list once live. */
async function followingLive(owner: OwnerContext, action: () => Promise<unknown>): Promise<void> {
  const listed = owner.page.waitForResponse((response) => response.url().endsWith("/api/notifications"));
  await action();
  await listed;
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

describeInBrowser("notifications that stay until the owner dismisses them", () => {
  beforeAll(async () => {
    [browser, t] = await Promise.all([launchBrowser(), startAdminFixture()]);
  });

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("lists a reminder as it fires on any page, notifies, keeps it over a reload and in another browser, until dismissed", async () => {
    const owner = await openPage("/usage", { allowNotifications: true });
    const { page } = owner;
    const region = page.locator("#notifications");
    expect(await region.isHidden()).toBe(true);
    // Already allowed: nothing to ask.
    expect(await page.locator("#notifications-allow").isHidden()).toBe(true);
    const title = await page.title();
    await page.evaluate("window.__look(false)");
    await remind("water the plants", "Time to **water** the plants!");
    const item = page.locator("#notifications [data-notification]");
    await item.waitFor({ timeout: 15_000 });
    // In the owner's words: the reminder's note, never the model's instructions.
    await expect
      .poll(() => item.locator(".notification-title").textContent())
      .toMatch(/^Reminder · water the plants \d/);
    expect(await item.textContent()).not.toContain("Cron entry");
    expect(await item.locator("p strong").textContent()).toBe("water");
    const [answer] = await pending();
    expect(await page.evaluate("window.__notifications")).toEqual([
      {
        title: "Stavrobot · Reminder",
        body: "water the plants: Time to water the plants!",
        tag: `answer-${answer?.id}`,
      },
    ]);
    expect(await page.title()).toBe(`(1) ${title}`);
    // Not seen while the owner looks elsewhere: another console would still show it.
    expect(answer?.response).toBe("Time to **water** the plants!");
    await page.evaluate("window.__look(true)");
    await vi.waitFor(async () => expect(await pending()).toEqual([]), { timeout: 15_000 });
    expect(await page.title()).toBe(title);
    await screenshot(page, "notification-listed");

    // Seen, but listed until dismissed: after a reload, and in another browser.
    await followingLive(owner, () => page.reload());
    await item.waitFor();
    expect(await item.getAttribute("data-notification")).toBe(String(answer?.id));
    const other = await openPage("/", { allowNotifications: false });
    const elsewhere = other.page.locator("#notifications [data-notification]");
    await elsewhere.waitFor();
    expect(await elsewhere.locator(".notification-title").textContent()).toMatch(
      /^Reminder · water the plants /,
    );
    // No notification for what was there before the page opened.
    expect(await other.page.evaluate("window.__notifications")).toEqual([]);

    await item.getByRole("button", { name: "Dismiss: water the plants" }).click();
    await region.waitFor({ state: "hidden" });
    // The other browser stops listing it at once.
    await other.page.locator("#notifications").waitFor({ state: "hidden" });
    const listed = await fetch(`http://127.0.0.1:${t.app.port}/api/notifications`, {
      headers: { Authorization: basicAuthHeader(PASSWORD) },
    });
    expect(await listed.json()).toEqual({ notifications: [] });
    await followingLive(owner, () => page.reload());
    expect(await region.isHidden()).toBe(true);
    expectNoProblems(owner);
    expectNoProblems(other);
    await other.context.close();
    await owner.context.close();
  });

  it("asks for notifications only when the button is pressed, and carries on quietly when refused", async () => {
    const owner = await openPage("/", { allowNotifications: false });
    const { page } = owner;
    await expect.poll(() => page.textContent("#live-status")).toBe("Live");
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
      .locator("#notifications [data-notification]", { hasText: "Call the bank before noon." })
      .waitFor({ timeout: 15_000 });
    expect(await page.locator("#notifications-allow").isHidden()).toBe(true);
    expect(await page.evaluate("window.__notifications")).toEqual([]);
    await page.evaluate("window.__look(true)");
    await vi.waitFor(async () => expect(await pending()).toEqual([]), { timeout: 15_000 });
    // The chat works as before.
    t.fake.enqueue(textTurn("Anything else?"));
    await page.fill("#chat-input", "thanks");
    await page.click("#chat-send");
    await page.locator(".bubble.assistant:not(.pending)", { hasText: "Anything else?" }).waitFor();
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("shows the recent conversation in the chat after a reload, reminders in the owner's words", async () => {
    const owner = await openPage("/", { allowNotifications: false });
    const { page } = owner;
    await remind("feed the cat", "Feed the cat now.");
    await page
      .locator("#notifications [data-notification]", { hasText: "Feed the cat now." })
      .waitFor({ timeout: 15_000 });
    t.fake.enqueue(textTurn("All **good** here."));
    await page.fill("#chat-input", "how are things?");
    await page.click("#chat-send");
    await page.locator(".bubble.assistant:not(.pending)", { hasText: "All good here." }).waitFor();
    await followingLive(owner, () => page.reload());
    const log = page.locator("#chat-log");
    await log.locator(".history-end").waitFor();
    const users = await log.locator(".bubble.user.history").allTextContents();
    expect(users).toContain("how are things?");
    const replies = log.locator(".bubble.assistant.history");
    expect((await replies.last().textContent())?.trim()).toBe("All good here.");
    expect(await replies.last().locator("strong").textContent()).toBe("good");
    // The owner's request and the reminder it set, named by its note; never the model's instructions.
    expect(users).toContain("remind me to feed the cat");
    const reminder = log.locator(".bubble.kept", { hasText: "Feed the cat now." });
    expect(await reminder.locator(".kept-from").textContent()).toMatch(/^Reminder · feed the cat · /);
    expect(await log.textContent()).not.toContain("has fired");
    await screenshot(page, "home-chat-history");
    expectNoProblems(owner);
    await owner.context.close();
  });
});
