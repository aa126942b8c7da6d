import { join } from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser, Page } from "playwright-core";
import { textTurn } from "@stavrobot/common/test-support";
import { uniqueName } from "../../../plugin-runner/test/helpers.js";
import { writeCyclopOnePlugin } from "../../../plugin-runner/test/format-fixtures.js";
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
 * The Plugins page for plugins of other formats, in a real browser against the product: a
 * Cyclop One plugin dropped into the plugins directory shows its format, the permissions it asked
 * for and that it waits; the owner approves it and switches another plugin's network off.
 */
let browser: Browser;
let t: AdminFixture;
let owner: OwnerContext;
let page: Page;
const cyclop = uniqueName("dropped-c1");

describeInBrowser("the Plugins page with a Cyclop One plugin", () => {
  beforeAll(async () => {
    [browser, t] = await Promise.all([launchBrowser(), startAdminFixture()]);
    owner = await ownerContext(browser, t.app.port);
    page = owner.page;
    // The runner tells the owner the dropped plugin waits: that message is a turn of its own.
    t.fake.enqueue(textTurn("A plugin waits for your approval."));
    writeCyclopOnePlugin(join(t.pluginsDir, cyclop), {
      name: cyclop,
      permissions: ["network", "filesystem:read"],
    });
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 20_000 });
    await t.app.quiet();
  });

  afterAll(async () => {
    await t?.runner("POST", "/remove", { name: cyclop });
    await browser?.close();
    await t?.close();
  });

  const card = () => page.locator(`[data-plugin="${cyclop}"]`);

  it("shows the format, what it asks for and that it waits; the owner approves it", async () => {
    await page.goto("/settings/plugins");
    await card().waitFor();
    expect(await card().locator("[data-format]").textContent()).toBe("Cyclop One");
    expect(await card().locator("[data-waiting]").textContent()).toBe("waits for approval");
    await card().locator("summary").click();
    await card().locator("[data-asks]").waitFor();
    expect(await card().locator("[data-asks]").textContent()).toContain(
      "It asks for: network, filesystem:read.",
    );
    expect(await card().locator('[data-approval="waiting"]').textContent()).toContain("hello_greet");
    await screenshot(page, "plugins-cyclop-one-waiting");
    await card().locator('[data-action="approve"]').click();
    await card().locator('[data-approval="approved"]').waitFor();
    expect(await card().locator("[data-waiting]").count()).toBe(0);
    const run = await t.runner("POST", `/bundles/${cyclop}/tools/hello_greet/run`, { name: "Page" });
    expect(run.body).toEqual({ success: true, output: "Hello, Page!" });
    expectNoProblems(owner);
  });

  it("switches the plugin's network off, and says whether this machine can cut it", async () => {
    await page.goto("/settings/plugins");
    await card().waitFor();
    // Opened cards stay open for the tab.
    if ((await card().getAttribute("open")) === null) await card().locator("summary").click();
    const box = card().locator("[data-network]");
    await box.waitFor();
    expect(await box.isChecked()).toBe(true);
    await box.uncheck();
    await card().locator("[data-no-network]").waitFor();
    const detail = await t.runner("GET", `/bundles/${cyclop}`);
    expect(detail.body).toMatchObject({ network: false, networkAllowed: true });
    expect(await page.locator("#network-note").isHidden()).toBe(
      (await t.app.runnerHealth()).sandbox.mode === "namespaces",
    );
    expectNoProblems(owner);
  });
});
