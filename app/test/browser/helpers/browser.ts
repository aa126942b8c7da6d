import { accessSync, constants, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { describe, expect } from "vitest";
import { PASSWORD } from "../../helpers/app.js";

/**
 * Browser tests drive Debian's `chromium` with playwright-core (no browser download). A file
 * skips itself, saying why, only when no Chromium executable is found; CI installs one.
 */
const CANDIDATES = [
  process.env.CHROMIUM_PATH,
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome-stable",
  "/usr/bin/google-chrome",
];

export const chromiumPath = CANDIDATES.find((path) => {
  if (!path) return false;
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
});

/** `describe` when Chromium is here, else a skipped block with the reason in its name and on stderr. */
export function describeInBrowser(name: string, body: () => void): void {
  if (chromiumPath) {
    describe(name, body);
    return;
  }
  const reason = `no Chromium executable found (looked for CHROMIUM_PATH and ${CANDIDATES.slice(1).join(", ")}); install Debian's chromium to run the browser tests`;
  console.warn(`[browser tests] skipped "${name}": ${reason}`);
  describe.skip(`${name} (skipped: ${reason})`, body);
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath, headless: true });
}

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
/** Screenshots of every page, kept as CI artifacts (git-ignored). */
export const SCREENSHOTS_DIR = join(repoRoot, "artifacts", "screenshots");

export const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true };

export interface OwnerContext {
  context: BrowserContext;
  page: Page;
  /** Console errors, uncaught exceptions and policy (CSP) violations seen so far. */
  problems: string[];
}

/**
 * A browser context logged in as the owner (the browser answers the Basic auth challenge with
 * the password, as a person typing it into the prompt would) and one page in it, whose errors are
 * collected: a page that breaks, or needs something the CSP forbids, fails its test.
 */
export async function ownerContext(
  browser: Browser,
  port: number,
  options: { phone?: boolean; dark?: boolean; password?: string | null } = {},
): Promise<OwnerContext> {
  const context = await browser.newContext({
    baseURL: `http://127.0.0.1:${port}`,
    ...(options.password === null
      ? {}
      : { httpCredentials: { username: "owner", password: options.password ?? PASSWORD } }),
    ...(options.phone ? PHONE : { viewport: { width: 1280, height: 900 } }),
    colorScheme: options.dark ? "dark" : "light",
  });
  // Fail in seconds, not the default 30 s: everything here is local.
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  return { context, page, problems };
}

/** Fails when the page logged errors (an API answering an expected error is not one). */
export function expectNoProblems(owner: OwnerContext, allowed: RegExp[] = []): void {
  const unexpected = owner.problems.filter((problem) => !allowed.some((pattern) => pattern.test(problem)));
  expect(unexpected).toEqual([]);
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS_DIR, `${name}.png`), fullPage: true });
}

/** True when the page is no wider than the viewport (nothing to scroll sideways on a phone). */
export async function fitsViewport(page: Page): Promise<boolean> {
  // A string: this runs in the page, and the tests are compiled without the DOM's types.
  return page.evaluate<boolean>("document.documentElement.scrollWidth <= window.innerWidth + 1");
}
