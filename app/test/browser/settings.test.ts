import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp } from "../../src/app.js";
import { readFullBackup, restoreFullBackup } from "../../src/db/full-restore.js";
import { PASSWORD, configFor, createTestEnv, post, type TestEnv } from "../helpers/app.js";
import { freePort } from "../helpers/process.js";
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
 * The provider set from the Settings page in a real browser, against the product (`npm start`):
 * Home says plainly that the assistant cannot answer while the provider refuses its key; the
 * Settings page shows whether a key is set (never the key), says when the provider refuses a new
 * one, and once it accepts one the assistant answers with it at once and the banner is gone. Then
 * the backup: downloaded from the page, it holds what a restore needs, and the restore takes it;
 * one that fails says why on a page (that one on the sources: see there).
 */
const REFUSED_KEY = "sk-ant-invalid-at-first";
const GOOD_KEY = "sk-ant-api03-from-the-page";
let browser: Browser;
let fake: FakeLlmServer;
let env: TestEnv;
let app: Product;
const scratch = mkdtempSync(join(tmpdir(), "stavrobot-settings-ui-"));

describeInBrowser("the Settings page in Chromium", () => {
  beforeAll(async () => {
    fake = await startFakeAnthropic();
    env = await createTestEnv(
      [
        'provider = "anthropic"',
        'model = "claude-sonnet-4-5"',
        `baseUrl = "${fake.url}"`,
        'api = "anthropic-messages"',
        `apiKey = "${REFUSED_KEY}"`,
        `password = "${PASSWORD}"`,
        "[queue]",
        "maxRetries = 0",
        "",
      ].join("\n"),
    );
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env)]);
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await fake?.close();
    await env?.cleanup();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("shows Home's banner while the key is refused, and sets a key that works at once", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/");
    const banner = page.locator("#provider-banner");
    await banner.waitFor();
    expect(await banner.textContent()).toContain("The assistant cannot answer yet");
    expect(await banner.textContent()).toContain("refused the key");
    await screenshot(page, "home-no-provider");
    await banner.locator("a", { hasText: "Settings" }).click();
    await page.waitForURL("**/settings");

    await page.locator("#key-state", { hasText: "A key is set" }).waitFor();
    expect(await page.inputValue("#provider")).toBe("anthropic");
    expect(await page.inputValue("#model")).toBe("claude-sonnet-4-5");
    expect(await page.isChecked('input[name="where"][value="endpoint"]')).toBe(true);
    expect(await page.inputValue("#base-url")).toBe(fake.url);
    expect(await page.inputValue("#api-key")).toBe("");
    expect(await page.content()).not.toContain(REFUSED_KEY);
    // The links the page always had are still there.
    for (const link of [
      "/settings/plugins",
      "/settings/allowlist",
      "/usage",
      "/settings/subscription",
      "/explorer",
    ]) {
      expect(await page.locator(`main a[href="${link}"]`).count()).toBeGreaterThan(0);
    }

    await page.fill("#api-key", "sk-ant-invalid-typed");
    await page.click("#provider-save");
    const error = page.locator("#provider-error");
    await error.waitFor();
    expect(await error.textContent()).toContain("refused the key");
    expect(readFileSync(env.env.CONFIG_PATH as string, "utf8")).toContain(REFUSED_KEY);

    await page.fill("#api-key", GOOD_KEY);
    await page.click("#provider-save");
    await page.locator("#provider-status", { hasText: "In use now" }).waitFor();
    expect(await error.isHidden()).toBe(true);
    expect(await page.content()).not.toContain(GOOD_KEY);
    expect(readFileSync(env.env.CONFIG_PATH as string, "utf8")).toContain(`apiKey = "${GOOD_KEY}"`);
    await screenshot(page, "settings");

    fake.enqueue(textTurn("Hello from the key set on the page."));
    const chat = await post(app.port, "/chat", { message: "hi" });
    expect(chat.body.response).toBe("Hello from the key set on the page.");

    await page.goto("/");
    await page.locator('#checks [data-check="provider"] .badge.ok').waitFor();
    expect(await banner.isHidden()).toBe(true);
    expectNoProblems(owner, [/status of 400/]);
    await owner.context.close();
  });

  it("fits a phone", async () => {
    const owner = await ownerContext(browser, app.port, { phone: true });
    await owner.page.goto("/settings");
    await owner.page.locator("#key-state", { hasText: "A key is set" }).waitFor();
    expect(await fitsViewport(owner.page)).toBe(true);
    await screenshot(owner.page, "settings-phone");
    expectNoProblems(owner);
    await owner.context.close();
  });

  it("says on a page why a backup failed, instead of downloading the error", async () => {
    // On the sources (startApp, in this process), with no plugin-runner: the backup fails when a
    // sibling does not send its state, and npm start's app never asks one for it: the runner keeps
    // its state in the data directory, which the backup reads itself (and the launcher restarts a
    // runner that stops). An app whose data directory lacks the runner's parts, with no runner to
    // answer, is where it asks (compose: that state in the runner's own volumes).
    const sourcesEnv = await createTestEnv(configFor(fake));
    const sourcesApp = await startApp({
      env: { ...sourcesEnv.env, PLUGIN_RUNNER_URL: `http://127.0.0.1:${await freePort()}` },
      logger: silentLogger,
    });
    const owner = await ownerContext(browser, sourcesApp.port);
    const { page } = owner;
    try {
      await page.goto("/settings");
      await page.click("#backup-download");
      await page
        .locator("#backup-failed", { hasText: "plugin-runner did not send its state" })
        .waitFor({ timeout: 30_000 });
      await page.click("text=back to Settings");
      await page.locator("#backup-download").waitFor();
    } finally {
      await owner.context.close();
      await sourcesApp.close();
      await sourcesEnv.cleanup();
    }
  });

  it("downloads a backup that holds what a restore needs, and the restore takes it", async () => {
    const owner = await ownerContext(browser, app.port);
    const { page } = owner;
    await page.goto("/settings");
    const embedded = env.env.DATABASE_URL === undefined && env.env.PGHOST === undefined;
    if (!embedded) await page.locator("#backup-note", { hasText: "PostgreSQL server" }).waitFor();
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#backup-download")]);
    expect(download.suggestedFilename()).toMatch(/^stavrobot-full-[0-9TZ-]+\.tar\.gz$/);
    const archive = join(scratch, download.suggestedFilename());
    await download.saveAs(archive);
    const full = await readFullBackup(archive);
    expect(full?.manifest.database).toBe(embedded ? "embedded" : "server");
    const names = full!.entries.map((entry) => entry.name);
    expect(names).toContain("main/config.toml");
    expect(names.includes("pglite/PG_VERSION")).toBe(embedded);
    const config = full!.entries.find((entry) => entry.name === "main/config.toml");
    expect(Buffer.from(config!.data).toString()).toContain(GOOD_KEY);

    const restored = join(scratch, "restored");
    const result = await restoreFullBackup(full!, archive, restored);
    expect(result.database).toBe(embedded);
    expect(readFileSync(join(restored, "main", "config.toml"), "utf8")).toBe(
      readFileSync(env.env.CONFIG_PATH as string, "utf8"),
    );
    expectNoProblems(owner);
    await owner.context.close();
  }, 180_000);
});
