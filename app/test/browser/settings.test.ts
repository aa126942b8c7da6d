import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { silentLogger } from "@stavrobot/common";
import {
  FAKE_ANTHROPIC_MODELS,
  startFakeAnthropic,
  startFakeEmbeddings,
  textTurn,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import { startApp } from "../../src/app.js";
import { loadConfig } from "../../src/boot/config.js";
import { readFullBackup, restoreFullBackup } from "../../src/db/full-restore.js";
import { PASSWORD, configFor, createTestEnv, post, type TestEnv } from "../helpers/app.js";
import { raw } from "../helpers/http.js";
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

  it("sets search by meaning, checked with the endpoint before it is written", async () => {
    const embeddings = await startFakeEmbeddings({ apiKey: "sk-embed-page" });
    try {
      const owner = await ownerContext(browser, app.port);
      const { page } = owner;
      await page.goto("/settings");
      // Loaded: the key line is written from the settings, so a check made now is not undone by them.
      await page.locator("#embeddings-key-state", { hasText: "No key set" }).waitFor({ state: "attached" });
      expect(await page.isHidden("#embeddings-fields")).toBe(true);
      await page.check("#embeddings-on");
      await page.fill("#embeddings-base-url", embeddings.url);
      await page.fill("#embeddings-model", "fake-embed-small");
      await page.fill("#embeddings-key", "sk-wrong");
      await page.click("#embeddings-save");
      await page.locator("#embeddings-error", { hasText: "Incorrect API key provided" }).waitFor();
      expect(loadConfig(env.env.CONFIG_PATH as string).embeddings).toBeUndefined();
      await page.fill("#embeddings-key", "sk-embed-page");
      await page.click("#embeddings-save");
      await page.locator("#embeddings-status", { hasText: "Saved in config.toml and checked" }).waitFor();
      expect(loadConfig(env.env.CONFIG_PATH as string).embeddings).toMatchObject({
        baseUrl: embeddings.url,
        model: "fake-embed-small",
        apiKey: "sk-embed-page",
      });
      expect(await page.inputValue("#embeddings-key")).toBe("");
      expect(await page.textContent("#embeddings-key-state")).toContain("A key is set");
      await screenshot(page, "settings-embeddings");
      // Off again: the table is gone, search goes by words.
      await page.uncheck("#embeddings-on");
      await page.click("#embeddings-save");
      await page.locator("#embeddings-status", { hasText: "Search by meaning is off" }).waitFor();
      expect(loadConfig(env.env.CONFIG_PATH as string).embeddings).toBeUndefined();
      expectNoProblems(owner, [/409/]);
      await owner.context.close();
    } finally {
      await embeddings.close();
    }
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

/**
 * The provider set on the Settings page of a first start (`npm start`, config.toml without a key):
 * a misspelt model is refused with the closest names to pick from, a model the server does not
 * list can be saved anyway, a server without a model list is checked with one tiny request, the
 * local-server form writes the provider `local` as the terminal's questions do, and the restart it
 * waits for is one button away, after which Home and the assistant use it.
 */
describeInBrowser("the Settings page of a first start in Chromium", () => {
  let firstBrowser: Browser;
  let listing: FakeLlmServer;
  let unlisted: FakeLlmServer;
  let firstEnv: TestEnv;
  let first: Product;
  /** A restart cuts the page's connections for a moment: the browser says so in its console. */
  const RESTART_NOISE = [/ERR_CONNECTION_REFUSED|Failed to load resource|ERR_EMPTY_RESPONSE|net::ERR_/];

  beforeAll(async () => {
    listing = await startFakeAnthropic({ models: FAKE_ANTHROPIC_MODELS });
    unlisted = await startFakeAnthropic({ modelList: false });
    firstEnv = await createTestEnv(
      `provider = "anthropic"\nmodel = "claude-sonnet-4-5"\npassword = "${PASSWORD}"\n`,
    );
    [firstBrowser, first] = await Promise.all([launchBrowser(), startProduct(firstEnv)]);
  });

  afterAll(async () => {
    await firstBrowser?.close();
    await first?.stop();
    await listing?.close();
    await unlisted?.close();
    await firstEnv?.cleanup();
  });

  const configText = () => readFileSync(firstEnv.env.CONFIG_PATH as string, "utf8");

  it("offers the closest names for a misspelt model, and saves one the server does not list anyway", async () => {
    const owner = await ownerContext(firstBrowser, first.port);
    const { page } = owner;
    await page.goto("/settings");
    await page.locator("#key-state", { hasText: "No key is set" }).waitFor();
    await page.check('input[name="where"][value="endpoint"]');
    await page.fill("#base-url", listing.url);
    await page.selectOption("#api", "anthropic-messages");
    await page.fill("#model", "claude-sonet-4-5");
    await page.fill("#api-key", "sk-ant-api03-from-the-page");
    await page.click("#provider-save");
    const error = page.locator("#provider-error");
    await error.waitFor();
    expect(await error.textContent()).toContain('the provider lists no model "claude-sonet-4-5"');
    const suggestion = page.locator('#provider-suggestions button[data-name="claude-sonnet-4-5-20250929"]');
    await suggestion.waitFor();
    expect(await page.isVisible("#provider-save-anyway")).toBe(true);
    expect(configText()).not.toContain("claude-sonet-4-5");
    await screenshot(page, "settings-did-you-mean");
    await suggestion.click();
    expect(await page.inputValue("#model")).toBe("claude-sonnet-4-5-20250929");

    // A model the server does not list, written all the same when the owner says so.
    await page.fill("#model", "my-own-fine-tune");
    await page.fill("#api-key", "sk-ant-api03-from-the-page");
    await page.click("#provider-save");
    await page.locator("#provider-save-anyway:visible").waitFor();
    await page.fill("#api-key", "sk-ant-api03-from-the-page");
    await page.click("#provider-save-anyway");
    await page.locator("#provider-status", { hasText: "Saved in config.toml as it is, unchecked" }).waitFor();
    expect(configText()).toContain('model = "my-own-fine-tune"');
    expectNoProblems(owner, [/status of 400/]);
    await owner.context.close();
  });

  it("writes the local-server form's provider as local, checks a server without a list, and restarts into it", async () => {
    const owner = await ownerContext(firstBrowser, first.port);
    const { page } = owner;
    await page.goto("/");
    const banner = page.locator("#provider-banner");
    await banner.waitFor();
    expect(await banner.textContent()).toContain("used after a restart");
    await page.goto("/settings");
    await page.locator("#provider-restart-now").waitFor();
    // Back to the provider's service, then the form for a server of one's own: not "anthropic".
    await page.check('input[name="where"][value="provider"]');
    await page.fill("#provider", "anthropic");
    await page.check('input[name="where"][value="endpoint"]');
    expect(await page.inputValue("#provider")).toBe("local");
    await page.fill("#base-url", `${unlisted.url}/v1`);
    await page.selectOption("#api", "anthropic-messages");
    await page.fill("#model", "claude-sonnet-4-5");
    await page.check("#remove-key");
    unlisted.enqueue(textTurn("H"));
    await page.click("#provider-save");
    const status = page.locator("#provider-status");
    await page.locator("#provider-status", { hasText: "one-token request" }).waitFor();
    expect(await status.textContent()).toContain("taken without /v1");
    expect(await status.textContent()).toContain("It is used after a restart.");
    const config = loadConfig(firstEnv.env.CONFIG_PATH as string);
    // A model the price list knows, at a server of one's own: free, as the terminal's questions make it.
    expect(config).toMatchObject({ provider: "local", model: "claude-sonnet-4-5", baseUrl: unlisted.url });
    expect(config.apiKey).toBeUndefined();

    await page.click("#provider-restart-now");
    await page
      .locator("#provider-status", { hasText: "Restarted: local/claude-sonnet-4-5 is in use now." })
      .waitFor({
        timeout: 90_000,
      });
    expect(await page.isHidden("#provider-restart")).toBe(true);
    await screenshot(page, "settings-restarted");

    // Home and the assistant use it: no banner, and an answer from the server.
    unlisted.enqueue(textTurn("Hello from the server set on the page."));
    const chat = await post(first.port, "/chat", { message: "hi" });
    expect(chat.body.response).toBe("Hello from the server set on the page.");
    // Home's check asks the server without a list once this start, with a one-token request.
    unlisted.enqueue(textTurn("H"));
    await page.goto("/");
    await page.locator('#checks [data-check="provider"] .badge.ok').waitFor();
    expect(await banner.isHidden()).toBe(true);
    expect(await page.locator('[data-check="provider"]').textContent()).toContain("one-token request");
    // Counted free: not at Claude's list price.
    const usage = await raw(first.port, "GET", "/api/usage");
    expect(usage.json.model).toMatchObject({ id: "claude-sonnet-4-5", priced: false });
    expectNoProblems(owner, RESTART_NOISE);
    await owner.context.close();
  }, 150_000);
});
