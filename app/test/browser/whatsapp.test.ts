import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser } from "playwright-core";
import { silentLogger } from "@stavrobot/common";
import { freePort, startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../../src/app.js";
import { configFor, createTestEnv, type TestEnv } from "../helpers/app.js";
// The real whatsapp-bridge with fake sockets for Baileys: the page links as it would with WhatsApp.
import type { TestBridge } from "../../../whatsapp-bridge/test/helpers.js";
import { SECRET, startTestBridge } from "../../../whatsapp-bridge/test/helpers.js";
import {
  describeInBrowser,
  expectNoProblems,
  launchBrowser,
  ownerContext,
  screenshot,
} from "./helpers/browser.js";

/**
 * The WhatsApp page in Chromium: an unlinked number, the warning to use a dedicated one, a QR code
 * drawn by the app that follows WhatsApp's rotation, a pairing code, and Home once it is open.
 */
let browser: Browser;
let fake: FakeLlmServer;
let bridge: TestBridge;
let env: TestEnv;
let app: RunningApp;

/** A loaded machine (CI runs two cores busy) answers a click in more than the poll's default second. */
const POLL = { timeout: 15_000, interval: 100 };

describeInBrowser("the WhatsApp page in Chromium", () => {
  beforeAll(async () => {
    fake = await startFakeAnthropic();
    const internalPort = await freePort();
    bridge = await startTestBridge({ appUrl: `http://127.0.0.1:${internalPort}`, session: false });
    env = await createTestEnv(configFor(fake, "anthropic", `[owner]\nname = "Ada"\n[whatsapp]\n`));
    Object.assign(env.env, {
      INTERNAL_PORT: String(internalPort),
      STAVROBOT_INTERNAL_SECRET: SECRET,
      WHATSAPP_BRIDGE_URL: bridge.url,
    });
    [browser, app] = await Promise.all([launchBrowser(), startApp({ env: env.env, logger: silentLogger })]);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await bridge?.stop();
    await fake?.close();
    await env?.cleanup();
  });

  it("links with a rotating QR code or a pairing code, then shows the number open on Home", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/settings/whatsapp");
    await expect.poll(() => page.textContent("#whatsapp-state"), POLL).toBe("not linked");
    expect(await page.textContent(".warning")).toContain("dedicated number");
    expect(await page.isVisible("#whatsapp-qr")).toBe(false);

    await page.click("#whatsapp-link-qr");
    // The click returns before the page's request reaches the bridge and it opens a socket.
    await vi.waitFor(() => expect(bridge.fake.sockets.length).toBeGreaterThanOrEqual(1), POLL);
    bridge.fake.last.qr("2@first-code,for,the,browser");
    await page.locator("#whatsapp-qr").waitFor({ state: "visible" });
    const drawn = () =>
      page.evaluate<number>(
        "document.getElementById('whatsapp-qr').complete ? document.getElementById('whatsapp-qr').naturalWidth : 0",
      );
    await expect.poll(drawn, POLL).toBeGreaterThan(0);
    const first = await page.getAttribute("#whatsapp-qr", "src");
    // WhatsApp rotates the code: the page follows.
    bridge.fake.last.qr("2@second-code,for,the,browser");
    await expect.poll(() => page.getAttribute("#whatsapp-qr", "src"), { timeout: 10_000 }).not.toBe(first);
    await screenshot(page, "whatsapp-qr");

    await page.fill("#whatsapp-number", "+1 555 000 1234");
    await page.click("#whatsapp-code-form button[type=submit]");
    await vi.waitFor(() => expect(bridge.fake.sockets.length).toBeGreaterThanOrEqual(2), POLL);
    bridge.fake.last.qr("ready-for-a-code");
    await expect
      .poll(() => page.textContent("#whatsapp-code"), { timeout: 10_000 })
      .toBe("Pairing code: ABCD-EFGH");
    expect(bridge.fake.last.pairingRequests).toEqual(["15550001234"]);
    expect(await page.isVisible("#whatsapp-qr")).toBe(false);

    bridge.fake.session = true;
    bridge.fake.last.open();
    await expect.poll(() => page.textContent("#whatsapp-state"), { timeout: 10_000 }).toBe("open");
    expect(await page.isVisible("#whatsapp-link")).toBe(false);
    expect(await page.isVisible("#whatsapp-unlink")).toBe(true);

    await page.goto("/");
    const row = page.locator("[data-whatsapp]");
    await row.waitFor();
    expect(await row.getAttribute("data-whatsapp")).toBe("open");
    expect(await row.textContent()).toContain("+15550009999");
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("refuses a number that is not in international form with the reason", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await bridge.request("POST", "/unlink");
    await page.goto("/settings/whatsapp");
    await expect.poll(() => page.textContent("#whatsapp-state"), POLL).toBe("not linked");
    await page.fill("#whatsapp-number", "0555 1234");
    await page.click("#whatsapp-code-form button[type=submit]");
    await expect.poll(() => page.textContent("#whatsapp-error"), POLL).toContain("E.164");
    expectNoProblems(owner, [/400 \(Bad Request\)/]);
    await owner.context.close();
  });
});
