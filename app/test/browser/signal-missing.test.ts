import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser } from "playwright-core";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { chat, configFor, createTestEnv, type TestEnv } from "../helpers/app.js";
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
 * An owner on Signal whose machine has no signal-cli, as people run it (`npm start`: the launcher
 * starts the real signal-bridge bundle, which cannot find signal-cli): the home page does not
 * show the bridge green, its log says once what to install, and a reminder that fires reaches
 * the owner in the page's notifications with the reason.
 */
let browser: Browser;
let fake: FakeLlmServer;
let env: TestEnv;
let app: Product;
const SIGNAL_CLI_PATH = "/nonexistent/signal-cli";

describeInBrowser("Signal without signal-cli, in Chromium", () => {
  beforeAll(async () => {
    fake = await startFakeAnthropic();
    env = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        '[owner]\nname = "Ada"\nsignal = "+15550002222"\n[signal]\naccount = "+15550001111"\n',
      ),
    );
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env, { env: { SIGNAL_CLI_PATH } })]);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await fake?.close();
    await env?.cleanup();
  });

  it("shows the bridge up but signal-cli missing, and the reminder Signal could not deliver", async () => {
    fake.enqueue(
      toolTurn("manage_cron", {
        action: "create",
        note: "water the plants",
        fire_at: new Date(Date.now() + 1_000).toISOString(),
      }),
      textTurn("Scheduled."),
      textTurn("Time to water the plants!"),
    );
    expect((await chat(app, "remind me to water the plants")).body.response).toBe("Scheduled.");
    // Fired, and waiting for Signal: what the queue card is given.
    await vi.waitFor(
      async () =>
        expect((await raw(app.port, "GET", "/api/status")).json.queue.deliveries).toEqual({
          waiting: 1,
          givenUp: 0,
          failing: { channel: "signal", error: expect.stringContaining("signal-cli is not installed") },
        }),
      { timeout: 20_000, interval: 200 },
    );

    const owner = await ownerContext(browser, app.port);
    await owner.page.goto("/");
    const row = owner.page.locator('[data-service="signal-bridge"]');
    await expect.poll(() => row.locator(".badge").textContent()).toBe("bridge up, signal-cli missing");
    expect(await row.locator(".badge").getAttribute("class")).toBe("badge warn");
    expect(await row.locator(".hint").textContent()).toContain(
      `signal-cli is not installed: "${SIGNAL_CLI_PATH}" was not found`,
    );
    expect(await owner.page.textContent("#channels")).toContain("bridge up, signal-cli missing");
    // The doctor's checks: the bridge needs a look, Signal fails, saying what to do.
    const bridgeCheck = owner.page.locator('[data-check="signal-bridge"]');
    await expect.poll(() => bridgeCheck.locator(".badge").textContent()).toBe("look");
    expect(await owner.page.locator('[data-check="signal"]').textContent()).toContain(
      "→ Install signal-cli (signal-bridge/README.md) or set SIGNAL_CLI_PATH to it",
    );
    // The reminder, in the owner's words, with the reason.
    const kept = owner.page.locator("#notifications [data-notification]");
    await kept.waitFor();
    expect(await kept.locator(".notification-title").textContent()).toMatch(/^Delivery · water the plants /);
    expect(await kept.textContent()).toContain(
      "Signal could not deliver this to you: signal-cli is not installed",
    );
    expect(await kept.textContent()).toContain("Time to water the plants!");
    await screenshot(owner.page, "home-signal-cli-missing");
    expectNoProblems(owner);
    await owner.context.close();

    // Said once, with what to do, though the bridge kept looking (1 s, 2 s, 4 s… apart) and the
    // app kept retrying (2 s, 4 s… apart): long enough for a few more of each.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    const notFound = app
      .output()
      .split("\n")
      .filter((line) => line.includes("ENOENT"));
    expect(notFound.filter((line) => line.includes("[signal-bridge]"))).toHaveLength(1);
    expect(notFound.filter((line) => line.includes("delivery failed; will retry"))).toHaveLength(1);
    for (const line of notFound) {
      expect(line).toContain("Install signal-cli (see signal-bridge/README.md) or set SIGNAL_CLI_PATH");
    }
  });
});
