import { readFile } from "node:fs/promises";
import { STATUS_CODES, type IncomingMessage } from "node:http";
import { join } from "node:path";
import type { HttpError, Reply } from "@stavrobot/common";
import { escapeAttribute, escapeHtml } from "../html.js";
import { WEB_DIR } from "./pages.js";
import { UI_HEADERS } from "./security.js";

export interface ErrorPageDeps {
  /** Whether the request was found to carry the owner's password (the page then has the navigation). */
  signedIn: (req: IncomingMessage) => boolean;
  webDir?: string;
}

interface Words {
  heading: string;
  detail: string;
  action: string;
  href: string;
}

/**
 * The page a browser gets for an error where it opened an address (a GET or HEAD whose `Accept`
 * names text/html: a navigation, not a page's script, whose `fetch` keeps the JSON): what happened
 * and what to do, with the admin UI's layout for the owner and a bare page for anyone else (a
 * sign-in window closed, too many wrong passwords, a model's page that is not there), which loads
 * nothing that would need the password.
 */
export function createErrorPages(deps: ErrorPageDeps) {
  const webDir = deps.webDir ?? WEB_DIR;
  let templates: Promise<{ layout: string; bare: string; content: string }> | undefined;
  const load = async () => {
    const [layout, bare, content] = await Promise.all(
      ["layout.html", "bare.html", join("pages", "error.html")].map((file) =>
        readFile(join(webDir, file), "utf8"),
      ),
    );
    return { layout: layout!, bare: bare!, content: content! };
  };
  return async ({ req, url, error }: { req: IncomingMessage; url: URL; error: HttpError }) => {
    if (req.method !== "GET" && req.method !== "HEAD") return undefined;
    if (!req.headers.accept?.includes("text/html")) return undefined;
    templates ??= load();
    const loaded = await templates.catch((failure: unknown) => {
      templates = undefined;
      throw failure;
    });
    const words = wordsFor(error, url);
    const owner = deps.signedIn(req) && error.status !== 401 && error.status !== 429;
    const content = fillIn(loaded.content, {
      heading: escapeHtml(words.heading),
      detail: escapeHtml(words.detail),
      action: escapeHtml(words.action),
      href: escapeAttribute(words.href),
    });
    const page = fillIn(owner ? loaded.layout : loaded.bare, {
      title: escapeHtml(words.heading),
      script: "",
      content,
    });
    return {
      body: page,
      headers: { ...UI_HEADERS, "Content-Type": "text/html; charset=utf-8" },
    } satisfies Reply;
  };
}

function wordsFor(error: HttpError, url: URL): Words {
  const here = url.pathname + url.search;
  switch (error.status) {
    case 401:
      return {
        heading: "Sign in to continue",
        detail:
          'These pages need the password from config.toml (the line password = "..."; any user name will do). ' +
          "Your browser asks for it when a page opens; if its window was closed without signing in, try again.",
        action: "Try again",
        href: here,
      };
    case 429:
      return { heading: "Too many wrong passwords", detail: error.message, action: "Try again", href: here };
    case 404:
      return {
        heading: "Page not found",
        detail: `Nothing is at ${url.pathname}.`,
        action: "Go to Home",
        href: "/",
      };
    case 500:
      return {
        heading: "Something went wrong",
        detail: "The assistant could not answer this page; its log says why.",
        action: "Go to Home",
        href: "/",
      };
    default:
      return {
        heading: STATUS_CODES[error.status] ?? `Error ${error.status}`,
        detail: error.message,
        action: "Go to Home",
        href: "/",
      };
  }
}

/** Puts the values into `{{name}}`; function replacements, so a `$` in a value is text. */
function fillIn(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (whole, name: string) => values[name] ?? whole);
}
