import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import {
  serveDirectory,
  startFakeAnthropic,
  type FakeLlmServer,
  type FileServer,
} from "@stavrobot/common/test-support";
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
 * The Skills page under `npm start`: the owner installs a skill page by its address, reads its
 * text before approving it, approves it (the model's list then names it), disables and removes it.
 */
let browser: Browser;
let fake: FakeLlmServer;
let env: TestEnv;
let app: Product;
let site: FileServer;
let siteDir: string;

describeInBrowser("the Skills page, in Chromium", () => {
  beforeAll(async () => {
    siteDir = mkdtempSync(join(tmpdir(), "skills-page-site-"));
    copyFileSync(
      join(import.meta.dirname, "..", "fixtures", "skills", "reading-log.md"),
      join(siteDir, "reading-log.md"),
    );
    site = await serveDirectory(siteDir);
    fake = await startFakeAnthropic();
    env = await createTestEnv(configFor(fake, "anthropic", "[skills]\nallowPrivateSources = true\n"));
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env)]);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await fake?.close();
    await site?.close();
    await env?.cleanup();
    if (siteDir) rmSync(siteDir, { recursive: true, force: true });
  });

  it("installs by address, shows the text while it waits, approves, disables and removes", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/settings/skills");
    await page.fill("#skill-install-url", `${site.url}/reading-log.md`);
    await page.click("#skill-install-button");
    const card = page.locator('[data-skill="reading-log"]');
    await card.waitFor();
    expect(await card.locator("[data-status]").getAttribute("data-status")).toBe("pending");
    // Its text, as the assistant would read it, before the owner approves anything.
    await card.locator("pre.skill-source").waitFor();
    expect(await card.locator("pre.skill-source").textContent()).toContain("reading");
    const listed = async () =>
      (
        (await raw(app.port, "GET", "/api/settings/skills")).json as {
          skills: { name: string; status: string }[];
        }
      ).skills;
    expect(await listed()).toEqual([expect.objectContaining({ name: "reading-log", status: "pending" })]);
    await screenshot(page, "skills-waiting");

    await card.getByRole("button", { name: "Approve" }).click();
    await page.locator('[data-skill="reading-log"] [data-status="approved"]').waitFor();
    expect(await listed()).toEqual([expect.objectContaining({ status: "approved" })]);

    // An approved skill's card is folded: the owner opens it to act on it.
    const open = () => page.locator('[data-skill="reading-log"] summary').click();
    await open();
    await page.locator('[data-skill="reading-log"]').getByRole("button", { name: "Disable" }).click();
    await page.locator('[data-skill="reading-log"] [data-status="disabled"]').waitFor();

    await open();
    page.once("dialog", (dialog) => void dialog.accept());
    await page.locator('[data-skill="reading-log"]').getByRole("button", { name: "Remove" }).click();
    await page.locator('[data-skill="reading-log"]').waitFor({ state: "detached" });
    expect(await listed()).toEqual([]);
    expectNoProblems(owner);
    await owner.context.close();
  });
});
