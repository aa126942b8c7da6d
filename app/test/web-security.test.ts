import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { UI_PAGES, WEB_DIR } from "../src/web/pages.js";
import { UI_CSP } from "../src/web/security.js";
import { INTERNAL_SECRET, configFor, useTestApp } from "./helpers/app.js";
import { fromPage, raw } from "./helpers/http.js";

/**
 * The admin UI's pages and assets, and the measures around them: Basic auth, a strict CSP with
 * nothing inline, nosniff and no-referrer, assets only from the app's own set, the Origin check
 * on every state-changing request, and JSON-only bodies.
 */
const PUBLIC_ADDRESS = "https://bot.example.com";
const t = useTestApp({
  // Top-level keys go before the first table.
  config: (fake) => configFor(fake).replace(/^\[queue\]/m, `publicHostname = "${PUBLIC_ADDRESS}"\n[queue]`),
});
const here = () => `http://127.0.0.1:${t.app.port}`;

describe("pages", () => {
  it.each(UI_PAGES.map((page) => page.path))(
    "%s is HTML behind the password with the strict policy",
    async (path) => {
      const page = await raw(t.app.port, "GET", path);
      expect(page.status).toBe(200);
      expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(page.headers["content-security-policy"]).toBe(UI_CSP);
      expect(page.headers["x-content-type-options"]).toBe("nosniff");
      expect(page.headers["referrer-policy"]).toBe("no-referrer");
      expect(page.headers["cache-control"]).toBe("no-store");
      expect(page.text).toMatch(/^<!doctype html>/);
      expect(page.text).toContain('<link rel="stylesheet" href="/assets/style.css" />');
      expect(page.text).toContain('href="/settings/subscription"');
      expect((await raw(t.app.port, "GET", path, { auth: null })).status).toBe(401);
    },
  );

  it("puts each page's own script in the layout", async () => {
    const home = await raw(t.app.port, "GET", "/");
    expect(home.text).toContain('<script type="module" src="/assets/js/home.js"></script>');
    expect(home.text).toContain("<title>Home · Stavrobot</title>");
    expect(home.text).toContain('id="chat-form"');
    const settings = await raw(t.app.port, "GET", "/settings");
    expect(settings.text).not.toContain("/assets/js/undefined");
    expect(settings.text).toContain('href="/settings/allowlist"');
  });

  it("sends GET /plugins to the plugin settings page", async () => {
    const moved = await raw(t.app.port, "GET", "/plugins");
    expect(moved.status).toBe(302);
    expect(moved.headers.location).toBe("/settings/plugins");
  });

  it("has no inline script, style or event handler anywhere the policy would have to allow", () => {
    const files = [
      join(WEB_DIR, "layout.html"),
      join(WEB_DIR, "bare.html"),
      ...readdirSync(join(WEB_DIR, "pages")).map((name) => join(WEB_DIR, "pages", name)),
    ];
    for (const file of files) {
      const html = readFileSync(file, "utf8");
      expect(html, file).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/i);
      expect(html, file).not.toMatch(/<style|\sstyle=|\son[a-z]+=|javascript:/i);
    }
    const scripts = readdirSync(join(WEB_DIR, "assets", "js"), { recursive: true, encoding: "utf8" });
    for (const name of scripts.filter((entry) => entry.endsWith(".js"))) {
      const code = readFileSync(join(WEB_DIR, "assets", "js", name), "utf8");
      // Data goes in as text; Markdown (markdown.js, raw HTML escaped) is the one use of innerHTML.
      if (!name.endsWith("markdown.js"))
        expect(code, name).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML/);
      expect(code, name).not.toMatch(/\beval\(|new Function|setAttribute\("style"|\.style\./);
    }
  });
});

describe("errors opened by a browser", () => {
  const asBrowser = { Accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" };

  it("is a page for an address that is not there, with the navigation, and JSON for a script", async () => {
    const page = await raw(t.app.port, "GET", "/no/such/page?x=<b>", { headers: asBrowser });
    expect(page.status).toBe(404);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["content-security-policy"]).toBe(UI_CSP);
    expect(page.text).toMatch(/^<!doctype html>/);
    expect(page.text).toContain("<title>Page not found · Stavrobot</title>");
    expect(page.text).toContain('<p id="error-detail">Nothing is at /no/such/page.</p>');
    expect(page.text).toContain('href="/settings/subscription"');
    // A page's script, curl and a form's POST keep the JSON.
    expect((await raw(t.app.port, "GET", "/no/such/page")).json).toEqual({ error: "Not found" });
    const posted = await raw(t.app.port, "POST", "/no/such/page", {
      headers: { ...asBrowser, "Content-Type": "application/json" },
      body: "{}",
    });
    expect([posted.status, posted.json]).toEqual([404, { error: "Not found" }]);
  });

  it("is a page saying what to do when the sign-in is cancelled, still asking for the password", async () => {
    const page = await raw(t.app.port, "GET", "/usage?range=30", { headers: asBrowser, auth: null });
    expect(page.status).toBe(401);
    expect(page.headers["www-authenticate"]).toMatch(/^Basic realm="stavrobot"/);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.text).toContain("<h1>Sign in to continue</h1>");
    expect(page.text).toContain("password from config.toml");
    expect(page.text).toContain('<a id="error-action" href="/usage?range=30">Try again</a>');
    // Nothing on it needs the password: no navigation, and a style sheet anyone may load.
    expect(page.text).not.toContain("/assets/");
    expect(page.text).not.toContain('href="/settings');
    expect(page.text).toContain('href="/pages-lib/error.css"');
    expect((await raw(t.app.port, "GET", "/pages-lib/error.css", { auth: null })).status).toBe(200);
    // Without a browser's Accept, the JSON as before.
    const api = await raw(t.app.port, "GET", "/usage", { auth: null });
    expect(api.json).toEqual({ error: "Unauthorized" });
  });
});

describe("assets", () => {
  it("serves the stylesheet and scripts with their types, revalidated by ETag", async () => {
    const css = await raw(t.app.port, "GET", "/assets/style.css");
    expect(css.status).toBe(200);
    expect(css.headers["content-type"]).toBe("text/css; charset=utf-8");
    expect(css.headers["cache-control"]).toBe("private, no-cache");
    expect(css.headers["content-security-policy"]).toBe(UI_CSP);
    expect(css.headers["x-content-type-options"]).toBe("nosniff");
    const etag = css.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const again = await raw(t.app.port, "GET", "/assets/style.css", { headers: { "If-None-Match": etag } });
    expect(again.status).toBe(304);
    expect(again.text).toBe("");
    const script = await raw(t.app.port, "GET", "/assets/js/lib/api.js");
    expect(script.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(script.text).toContain("export async function api");
    const icon = await raw(t.app.port, "GET", "/assets/icon.svg");
    expect(icon.headers["content-type"]).toBe("image/svg+xml");
    expect((await raw(t.app.port, "GET", "/assets/style.css", { auth: null })).status).toBe(401);
  });

  it("serves marked's browser build from node_modules, not a CDN", async () => {
    const marked = await raw(t.app.port, "GET", "/assets/vendor/marked.esm.js");
    expect(marked.status).toBe(200);
    expect(marked.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(marked.text).toMatch(/export\s*\{[^}]*\bMarked\b/);
  });

  it.each([
    "/assets/../../src/app.ts",
    "/assets/%2e%2e/%2e%2e/src/app.ts",
    "/assets/js/%2e%2e%2f%2e%2e%2flayout.html",
    "/assets/..%2f..%2fpackage.json",
    "/assets/js/../../layout.html",
    "/assets//etc/passwd",
    "/assets/%2fetc%2fpasswd",
    "/assets/",
    "/assets/pages/home.html",
    "/assets/js/nope.js",
  ])("answers 404 for %s, which is not one of the assets", async (path) => {
    const answer = await raw(t.app.port, "GET", path);
    expect(answer.status).toBe(404);
    expect(answer.json).toEqual({ error: "Not found" });
  });
});

describe("the Origin check on state-changing requests", () => {
  const seen = (origin: string | undefined) =>
    fromPage(t.app.port, "POST", "/api/answers/seen", { ids: [] }, origin);

  it("refuses a request another site's page makes, with the owner's credentials", async () => {
    for (const origin of [
      "http://evil.example",
      "null",
      "https://127.0.0.1.evil.example",
      "not a url",
      "file://",
    ]) {
      const refused = await seen(origin);
      expect(refused.status, origin).toBe(403);
      expect(refused.json).toEqual({
        error: "Cross-site request refused: the Origin header does not name this host",
      });
    }
    const allowlist = await fromPage(
      t.app.port,
      "PUT",
      "/api/settings/allowlist",
      { signal: [], telegram: [], whatsapp: [], email: [] },
      "http://evil.example",
    );
    expect(allowlist.status).toBe(403);
    // A form on another site can send multipart, which the upload takes: Origin stops it.
    const upload = await raw(t.app.port, "POST", "/api/upload", {
      headers: { "Content-Type": "multipart/form-data; boundary=x", Origin: "http://evil.example" },
      body: '--x\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\nhi\r\n--x--\r\n',
    });
    expect(upload.status).toBe(403);
    // The same origin on another port is another site.
    expect((await seen(`http://127.0.0.1:${t.app.port + 1}`)).status).toBe(403);
  });

  it("lets this site's own pages, the public address and callers without Origin through", async () => {
    expect((await seen(here())).status).toBe(200);
    expect((await seen(PUBLIC_ADDRESS)).status).toBe(200);
    expect((await seen(undefined)).status).toBe(200);
  });

  it("does not concern reads, callers without the password, or the internal listener", async () => {
    const read = await raw(t.app.port, "GET", "/api/answers/pending", {
      headers: { Origin: "http://evil.example" },
    });
    expect(read.status).toBe(200);
    const anonymous = await raw(t.app.port, "POST", "/api/answers/seen", {
      headers: { Origin: "http://evil.example", "Content-Type": "application/json" },
      body: "{}",
      auth: null,
    });
    expect(anonymous.status).toBe(401);
    // A bad body gets its own answer: the internal listener never looks at Origin.
    const internal = await raw(t.app.internalPort, "POST", "/chat", {
      headers: { Origin: "http://evil.example", "Content-Type": "application/json" },
      body: "{}",
      auth: `Bearer ${INTERNAL_SECRET}`,
    });
    expect(internal.status).toBe(400);
  });
});

describe("state-changing APIs take JSON only", () => {
  it.each([
    ["POST", "/api/answers/seen", "text/plain"],
    ["POST", "/api/settings/plugins/configure", "application/x-www-form-urlencoded"],
    ["POST", "/api/settings/plugins/install", "multipart/form-data; boundary=x"],
    ["PUT", "/api/settings/allowlist", "text/plain"],
    ["POST", "/chat", "text/plain"],
  ])("%s %s refuses %s with 415", async (method, path, type) => {
    const answer = await raw(t.app.port, method, path, {
      headers: { "Content-Type": type, Origin: here() },
      body: '{"ids":[]}',
    });
    expect(answer.status).toBe(415);
    expect(answer.json.error).toMatch(/^Unsupported Content-Type/);
  });

  it("refuses a body that is not JSON with 400", async () => {
    const answer = await raw(t.app.port, "POST", "/api/answers/seen", {
      headers: { "Content-Type": "application/json" },
      body: "ids=1",
    });
    expect(answer.status).toBe(400);
    expect(answer.json.error).toMatch(/^Invalid JSON/);
  });
});
