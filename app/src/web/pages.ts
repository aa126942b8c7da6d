import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { Handler } from "@stavrobot/common";
import { APP_LAYOUT } from "../boot/app-dir.js";
import { UI_HEADERS } from "./security.js";

/** `app/web`, beside the code (`src`, `dist` in the image, or the bundle `npm start` runs). */
export const WEB_DIR = join(APP_LAYOUT.appDir, "web");

export interface UiPage {
  path: string;
  /** The page's body, a file in `app/web/pages`. */
  file: string;
  title: string;
  /** Its module under `/assets/js`, if it has one. */
  script?: string;
}

export const UI_PAGES: readonly UiPage[] = [
  { path: "/", file: "home.html", title: "Home", script: "home.js" },
  { path: "/explorer", file: "explorer.html", title: "Database", script: "explorer.js" },
  { path: "/settings", file: "settings.html", title: "Settings", script: "settings.js" },
  { path: "/settings/plugins", file: "plugins.html", title: "Plugins", script: "plugins.js" },
  { path: "/settings/skills", file: "skills.html", title: "Skills", script: "skills.js" },
  { path: "/settings/allowlist", file: "allowlist.html", title: "Allowlist", script: "allowlist.js" },
  { path: "/settings/email", file: "email.html", title: "Email", script: "email.js" },
  { path: "/settings/whatsapp", file: "whatsapp.html", title: "WhatsApp", script: "whatsapp.js" },
  { path: "/people", file: "people.html", title: "People", script: "people.js" },
  { path: "/usage", file: "usage.html", title: "Usage", script: "usage.js" },
  { path: "/schedule", file: "schedule.html", title: "Schedule", script: "schedule.js" },
  {
    path: "/settings/subscription",
    file: "subscription.html",
    title: "Provider subscription",
    script: "subscription.js",
  },
];

/**
 * A page handler: the page's body put into the shared layout (`app/web/layout.html`), read once,
 * when first asked for. Only the app's own files go into the template; data reaches a page
 * through its API and is put into the DOM as text by the page's script.
 */
export function createUiPageHandler(page: UiPage, webDir = WEB_DIR): Handler {
  let html: Promise<string> | undefined;
  return async () => {
    html ??= renderPage(page, webDir);
    return { body: await html, headers: { ...UI_HEADERS, "Content-Type": "text/html; charset=utf-8" } };
  };
}

async function renderPage(page: UiPage, webDir: string): Promise<string> {
  const [layout, content] = await Promise.all([
    readFile(join(webDir, "layout.html"), "utf8"),
    readFile(join(webDir, "pages", page.file), "utf8"),
  ]);
  const script = page.script ? `<script type="module" src="/assets/js/${page.script}"></script>` : "";
  // Function replacements: a `$` in a page is text, not a replacement pattern.
  return layout
    .replace("{{title}}", () => page.title)
    .replace("{{script}}", () => script)
    .replace("{{content}}", () => content);
}
