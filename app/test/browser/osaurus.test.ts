import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser, Page } from "playwright-core";
import { textTurn } from "@stavrobot/common/test-support";
import { makeTempRoot, uniqueName } from "../../../plugin-runner/test/helpers.js";
import { buildEchoLibrary, skillText, zipFiles } from "../../../plugin-runner/test/osaurus-fixtures.js";
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
 * The Plugins page with an Osaurus plugin (the C test plugin, built with gcc, installed as an
 * uploaded package): its format, that it was not verified, what its tools need, its skill, and
 * its `ask` tools approved one at a time.
 */
let browser: Browser;
let t: AdminFixture;
let owner: OwnerContext;
let page: Page;
let files: string;
const suffix = uniqueName("page").slice(5);
const name = `test-page${suffix}`;

describeInBrowser("the Plugins page with an Osaurus plugin", () => {
  beforeAll(async () => {
    [browser, t] = await Promise.all([launchBrowser(), startAdminFixture()]);
    owner = await ownerContext(browser, t.app.port);
    page = owner.page;
    files = makeTempRoot("osaurus-page");
    const lib = buildEchoLibrary(join(files, "libpage.so"), { pluginId: `test.page${suffix}` });
    const zip = zipFiles(files, `test.page${suffix}-1.0.0.zip`, {
      "libpage.so": readFileSync(lib),
      "skills/SKILL.md": skillText("page-skill", "A skill shown on the page."),
    });
    // The runner tells the owner the plugin waits: that message is a turn of its own.
    t.fake.enqueue(textTurn("A plugin waits for your approval."));
    const installed = await t.runner("POST", "/install", {
      package: { filename: `test.page${suffix}-1.0.0.zip`, data: readFileSync(zip).toString("base64") },
    });
    expect(installed.status).toBe(200);
    await vi.waitFor(() => expect(t.fake.requests).toHaveLength(1), { timeout: 20_000 });
    await t.app.quiet();
  });

  afterAll(async () => {
    await t?.runner("POST", "/remove", { name });
    await browser?.close();
    await t?.close();
    if (files) rmSync(files, { recursive: true, force: true });
  });

  const card = () => page.locator(`[data-plugin="${name}"]`);

  it("shows what its tools need and its skill; the owner approves its ask tools one by one", async () => {
    await page.goto("/settings/plugins");
    await card().waitFor();
    expect(await card().locator("[data-format]").textContent()).toBe("Osaurus");
    await card().locator("summary").click();
    await card().locator("[data-asks]").waitFor();
    const asks = await card().locator("[data-asks]").textContent();
    expect(asks).toContain("Its package was not verified.");
    expect(asks).toContain("Its tools need: denied: never runs (permission_policy deny), mail: automation.");
    expect(asks).toContain("Skills: page-skill.");
    expect(await card().locator('[data-approval="waiting"]').textContent()).toContain("ask_echo, legacy");
    await screenshot(page, "plugins-osaurus-waiting");
    await card().locator('[data-action="approve-tool"][data-tool="ask_echo"]').click();
    await vi.waitFor(async () =>
      expect(await card().locator('[data-approval="waiting"]').textContent()).not.toContain("ask_echo"),
    );
    const run = await t.runner("POST", `/bundles/${name}/tools/ask_echo/run`, {});
    expect(run.body.success).toBe(true);
    const legacy = await t.runner("POST", `/bundles/${name}/tools/legacy/run`, {});
    expect(legacy.body.error).toMatch(/needs the owner's approval/);
    expectNoProblems(owner);
  });
});
