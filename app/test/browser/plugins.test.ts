import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { chat } from "../helpers/app.js";
import { raw } from "../helpers/http.js";
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
 * The plugin manager in a real browser against the product (`npm start`) and a loopback git server:
 * install with progress, a secret set and reported as set but never shown, tools disabled and
 * the model losing them, update and remove.
 */
const SECRET_VALUE = "sk-weather-VERY-SECRET-31337";
let browser: Browser;
let t: AdminFixture;
let owner: OwnerContext;
let page: Page;

const card = () => page.locator(`[data-plugin="${t.plugin}"]`);
const configState = (key: string) =>
  card().locator(`[data-config-key="${key}"] [data-config-state]`).textContent();

/** The model asks to see the plugin; the tool result it gets back is returned. */
async function whatTheModelSees(): Promise<{ shown: string; system: string }> {
  t.fake.reset();
  t.fake.enqueue(toolTurn("manage_plugins", { action: "show", name: t.plugin }), textTurn("seen"));
  expect((await chat(t.app, "show me the weather plugin")).body.response).toBe("seen");
  return { shown: t.fake.requests[1]!.lastUserText, system: JSON.stringify(t.fake.requests[0]!.body.system) };
}

describeInBrowser("the plugin manager in Chromium", () => {
  beforeAll(async () => {
    [browser, t] = await Promise.all([launchBrowser(), startAdminFixture()]);
    owner = await ownerContext(browser, t.app.port);
    page = owner.page;
  });

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("installs a plugin from git and shows its progress: cloning, init, done", async () => {
    await page.goto("/settings/plugins");
    await page.getByText("No plugins yet").waitFor();
    await page.fill("#install-url", t.repoUrl);
    await page.click("#install-button");
    // The init script waits for its gate: the page says it is setting up.
    await page.locator('[data-step="init"][data-state="active"]').waitFor();
    expect(await page.getAttribute('[data-step="cloning"]', "data-state")).toBe("done");
    expect(await page.isDisabled("#install-button")).toBe(true);
    await screenshot(page, "plugins-installing");
    t.releaseInit();
    await page.locator('[data-step="done"][data-state="done"]').waitFor();
    // Written for the person reading it: what happened and what is left to do, not the model's orders.
    const told = (await page.textContent("#install-message")) ?? "";
    expect(told).toContain(`Installed ${t.plugin} (a Stavrobot plugin).`);
    expect(told).toContain(
      "Before the assistant can use it, fill in api_key (Weather API key) in its settings below.",
    );
    expect(told).not.toMatch(/relay|verbatim|do not follow|the owner/);
    expect(await page.textContent("#install-output")).toBe("weather data downloaded");
    await card().locator('[data-config-key="api_key"]').waitFor();
    // Plugin-authored instructions are text: their markup is shown, not obeyed.
    expect(await card().locator(".instructions").textContent()).toContain("<b>and</b>");
    expect(await card().locator("[data-permissions]").textContent()).toBe("all tools");
    expectNoProblems(owner);
  });

  it("sets a secret: reported as set, never shown, really stored", async () => {
    expect(await configState("api_key")).toBe("not set");
    // A default was applied at install.
    expect(await configState("units")).toBe("set");
    await card().locator('input[name="api_key"]').fill(SECRET_VALUE);
    await card().getByRole("button", { name: "Save configuration" }).click();
    await expect.poll(() => configState("api_key")).toBe("set");
    expect(await card().locator("[data-status]").textContent()).toContain("updated: api_key");
    expect(await card().locator('input[name="api_key"]').inputValue()).toBe("");
    await screenshot(page, "plugins");
    await page.reload();
    await card().locator('[data-config-key="api_key"]').waitFor();
    expect(await configState("api_key")).toBe("set");
    expect(await page.content()).not.toContain(SECRET_VALUE);
    const config = await raw(t.app.port, "GET", `/api/settings/plugins/${t.plugin}/config`);
    expect(config.json.configured).toEqual({ api_key: true, units: true });
    expect(config.text).not.toContain(SECRET_VALUE);
    const stored = JSON.parse(readFileSync(join(t.pluginsDir, t.plugin, "config.json"), "utf8"));
    expect(stored.api_key).toBe(SECRET_VALUE);
    expectNoProblems(owner);
  });

  it("disables one tool and the model loses it; disables the plugin and the model loses it all", async () => {
    const before = await whatTheModelSees();
    expect(before.shown).toContain("forecast");
    expect(before.shown).toContain("radar");
    expect(before.system).toContain(`- ${t.plugin}: Weather forecasts.`);

    await card().locator('[data-mode="chosen"]').check();
    await card().locator('[data-tool="radar"]').uncheck();
    await card().getByRole("button", { name: "Save permissions" }).click();
    await expect.poll(() => card().locator("[data-permissions]").textContent()).toBe("1 tool enabled");
    const oneTool = await whatTheModelSees();
    expect(oneTool.shown).toContain("forecast");
    expect(oneTool.shown).not.toContain("radar");

    await card().locator('[data-mode="none"]').check();
    await card().getByRole("button", { name: "Save permissions" }).click();
    await expect.poll(() => card().locator("[data-permissions]").textContent()).toBe("disabled");
    const disabled = await whatTheModelSees();
    expect(disabled.system).not.toContain(t.plugin);
    expect(disabled.shown).not.toContain("forecast");

    await card().locator('[data-mode="all"]').check();
    await card().getByRole("button", { name: "Save permissions" }).click();
    await expect.poll(() => card().locator("[data-permissions]").textContent()).toBe("all tools");
    expectNoProblems(owner);
  });

  it("updates and removes the plugin", async () => {
    await card().locator('[data-action="update"]').click();
    await expect
      .poll(() => card().locator("[data-status]").textContent(), { timeout: 20_000 })
      .toContain(`Plugin "${t.plugin}" updated.`);
    // The secret survives an update.
    expect(await configState("api_key")).toBe("set");
    page.once("dialog", (dialog) => void dialog.accept());
    await card().locator('[data-action="remove"]').click();
    await page.getByText("No plugins yet").waitFor();
    expect(await page.textContent("#plugins-note")).toBe(`Plugin "${t.plugin}" removed.`);
    expectNoProblems(owner);
  });

  it("reports a failed install in the page", async () => {
    await page.fill("#install-url", t.daemon.url("no-such-repo"));
    await page.click("#install-button");
    await page.locator("#install-error").waitFor({ state: "visible" });
    expect(await page.textContent("#install-error")).toMatch(/^Failed to clone repository/);
    expect(await page.getAttribute('[data-step="cloning"]', "data-state")).toBe("failed");
    await page.fill("#install-url", "file:///etc");
    await page.click("#install-button");
    await expect.poll(() => page.textContent("#install-error")).toMatch(/^Unsupported repository URL/);
    expectNoProblems(owner, [/status of 400/]);
  });
});
