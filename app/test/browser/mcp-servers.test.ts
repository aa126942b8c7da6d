import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser, Page } from "playwright-core";
import { makeTempRoot, uniqueName } from "../../../plugin-runner/test/helpers.js";
import { bundleFixtureServer } from "../../../plugin-runner/test/mcp/fixtures.js";
import {
  describeInBrowser,
  expectNoProblems,
  launchBrowser,
  ownerContext,
  screenshot,
  type OwnerContext,
} from "./helpers/browser.js";
import { configFor } from "../helpers/app.js";
import { startAdminFixture, type AdminFixture } from "./helpers/fixture.js";

/**
 * The Plugins page with the owner's MCP servers, in a real browser against the product under
 * `npm start` (the bundles): a
 * running stdio server shows its transport, state and tools (whose permissions the owner sets), a
 * server that cannot start shows failed with its last error, and no secret value is on the page.
 */
const SECRET_VALUE = "browser-env-secret-61c0de";
let browser: Browser;
let t: AdminFixture;
let owner: OwnerContext;
let page: Page;
let root: string;
const good = uniqueName("mcp-page");
const broken = uniqueName("mcp-broken");

describeInBrowser("the Plugins page with MCP servers", () => {
  beforeAll(async () => {
    root = makeTempRoot("mcp-page");
    const script = await bundleFixtureServer(root);
    const servers =
      `[mcpServers.${good}]\ncommand = "node"\nargs = [${JSON.stringify(script)}]\n` +
      `[mcpServers.${good}.env]\nFIXTURE_TOKEN = "${SECRET_VALUE}"\n` +
      `[mcpServers.${broken}]\ncommand = "node"\nargs = ["-e", "process.exit(7)"]\n`;
    [browser, t] = await Promise.all([launchBrowser(), startAdminFixture(servers)]);
    owner = await ownerContext(browser, t.app.port);
    page = owner.page;
  });

  afterAll(async () => {
    await browser?.close();
    if (t) {
      // Declarations removed while it runs: the servers stop and their users go.
      writeFileSync(t.env.env.CONFIG_PATH as string, configFor(t.fake));
      await vi
        .waitFor(async () => expect((await t.runner("GET", `/bundles/${good}`)).status).toBe(404), {
          timeout: 30_000,
        })
        .catch(() => undefined);
    }
    await t?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const card = (name: string) => page.locator(`[data-plugin="${name}"]`);

  it("shows a running server's transport, state and tools, and the owner narrows its permissions", async () => {
    await vi.waitFor(
      async () => {
        const detail = await t.runner("GET", `/bundles/${good}`);
        expect((detail.body as { server?: { state: string } }).server?.state).toBe("running");
      },
      { timeout: 30_000 },
    );
    await page.goto("/settings/plugins");
    await card(good).waitFor();
    expect(await card(good).locator("[data-format]").textContent()).toBe("MCP server");
    expect(await card(good).locator("[data-server-state]").textContent()).toBe("running");
    await card(good).locator("summary").click();
    await card(good).locator("[data-server]").waitFor();
    expect(await card(good).locator("[data-server]").textContent()).toContain("over stdio: running");
    await card(good).locator('[data-tool="say.hello-world"]').waitFor();
    await screenshot(page, "plugins-mcp-server");
    await card(good).locator('[data-mode="chosen"]').check();
    await card(good).locator('[data-tool="say.hello-world"]').uncheck();
    await card(good).locator('button:has-text("Save permissions")').click();
    await vi.waitFor(
      async () => {
        const config = await t.runner("GET", `/bundles/${good}/config`);
        const permissions = (config.body as { permissions: string[] }).permissions;
        expect(permissions).not.toContain("say.hello-world");
        expect(permissions).toContain("draw-pixel");
      },
      { timeout: 10_000 },
    );
    expect(await page.content()).not.toContain(SECRET_VALUE);
    expectNoProblems(owner);
  });

  it("shows a server that cannot start as failed, with its last error", async () => {
    await vi.waitFor(
      async () => {
        const detail = await t.runner("GET", `/bundles/${broken}`);
        expect((detail.body as { server?: { state: string } }).server?.state).toBe("failed");
      },
      { timeout: 30_000 },
    );
    await page.goto("/settings/plugins");
    await card(broken).waitFor();
    expect(await card(broken).locator("[data-server-state]").textContent()).toBe("failed");
    await card(broken).locator("summary").click();
    await card(broken).locator("[data-last-error]").waitFor();
    expect(await card(broken).locator("[data-last-error]").textContent()).toContain("code 7");
  });

  it("says why a change to [mcpServers] could not be used, while the servers keep running", async () => {
    const goodText = readFileSync(t.env.env.CONFIG_PATH as string, "utf8");
    writeFileSync(
      t.env.env.CONFIG_PATH as string,
      `${goodText}\n[mcpServers.more]\ncommand = "\${NOT_SET_HERE}"\n`,
    );
    try {
      const note = page.locator("#mcp-config-note");
      await vi.waitFor(
        async () => {
          await page.goto("/settings/plugins");
          await card(good).waitFor();
          expect(await note.isVisible()).toBe(true);
        },
        { timeout: 15_000 },
      );
      expect(await note.textContent()).toContain("NOT_SET_HERE is not set in the app's environment");
      expect(await note.textContent()).toContain("keep running");
      expect(await card(good).locator("[data-server-state]").textContent()).toBe("running");
      await screenshot(page, "plugins-mcp-config-problem");
    } finally {
      writeFileSync(t.env.env.CONFIG_PATH as string, goodText);
    }
  });
});
