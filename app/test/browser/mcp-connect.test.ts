import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { Browser, Page } from "playwright-core";
import { startFakeAnthropic, textTurn, toolTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { uniqueName } from "../../../plugin-runner/test/helpers.js";
// A loopback OAuth 2.1 authorization server and the MCP server (written with the SDK) it protects.
import { startOAuthFixture, type OAuthFixture } from "../../../plugin-runner/test/mcp/oauth-fixture.js";
import { chat, configFor, createTestEnv, type TestEnv } from "../helpers/app.js";
import { startProduct, stopAfterServersGo, type Product } from "../helpers/product.js";
import {
  describeInBrowser,
  expectNoProblems,
  launchBrowser,
  ownerContext,
  screenshot,
  type OwnerContext,
} from "./helpers/browser.js";

/**
 * The owner signs in to a remote MCP server that asks for OAuth, from the Plugins page in Chromium,
 * against the product under `npm start`: the server's card says it needs sign-in, Connect sends
 * the browser to the authorization server's consent page; Deny comes back to the app's callback
 * as a page saying so, Approve comes back to it and lands on the Plugins page with the server
 * running and its tool listed; the
 * model then calls that tool through `/chat`. No token the authorization server issued is ever
 * on a page.
 */
const server = uniqueName("mcp-connect");
let browser: Browser;
let fake: FakeLlmServer;
let oauth: OAuthFixture;
let env: TestEnv;
let app: Product;
let owner: OwnerContext;
let page: Page;
/** Every document the browser was given, to look for tokens in. */
const documents: string[] = [];

describeInBrowser("Connect for an MCP server that signs in with OAuth, in Chromium", () => {
  beforeAll(async () => {
    [fake, oauth] = await Promise.all([startFakeAnthropic(), startOAuthFixture()]);
    oauth.consentPage = true;
    const servers = `[mcpServers.${server}]\ntype = "http"\nurl = ${JSON.stringify(oauth.url)}\n`;
    env = await createTestEnv(configFor(fake, "anthropic", servers));
    [browser, app] = await Promise.all([launchBrowser(), startProduct(env)]);
    owner = await ownerContext(browser, app.port);
    page = owner.page;
    page.on("response", (response) => {
      if (response.request().resourceType() !== "document" && response.request().resourceType() !== "fetch")
        return;
      void response
        .text()
        .then((text) => documents.push(text))
        .catch(() => undefined);
    });
  });

  afterAll(async () => {
    await browser?.close();
    if (app) await stopAfterServersGo(app, env, configFor(fake), server);
    await oauth?.close();
    await fake?.close();
    await env?.cleanup();
  });

  const card = () => page.locator(`[data-plugin="${server}"]`);
  const serverStatus = async () =>
    ((await app.runner("GET", `/bundles/${server}`)).body as { server?: { state: string; signIn?: string } })
      .server;

  /** Connect on the server's card: the browser is on the authorization server's consent page. */
  async function connect(): Promise<URL> {
    await page.goto("/settings/plugins");
    await card().waitFor();
    if ((await card().getAttribute("open")) === null) await card().locator("summary").click();
    await card().locator("[data-connect]").getByRole("button").click();
    // The authorization server's own page, on its own origin, asking for the owner's consent.
    await page.waitForURL((url) => url.href.startsWith(`${new URL(oauth.url).origin}/authorize?`));
    await page.getByRole("button", { name: "Approve" }).waitFor();
    return new URL(page.url());
  }

  it("shows the card needing sign-in, and a refusal at the authorization server as a page that says so", async () => {
    await vi.waitFor(async () => expect((await serverStatus())?.signIn).toBe("needed"), {
      timeout: 30_000,
    });
    await page.goto("/settings/plugins");
    await card().waitFor();
    expect(await card().locator("[data-sign-in]").textContent()).toBe("needs sign-in");
    await card().locator("summary").click();
    const connectBox = card().locator("[data-connect]");
    await connectBox.waitFor();
    expect(await connectBox.textContent()).toContain("This server needs you to sign in.");
    expect(await connectBox.getByRole("button").textContent()).toBe("Connect");
    await screenshot(page, "plugins-mcp-needs-sign-in");

    await connect();
    await page.getByRole("button", { name: "Deny" }).click();
    // The app's callback, as the owner's browser opened it: the refusal in the admin UI's layout.
    await page.waitForURL((url) => url.pathname === "/oauth/mcp/callback");
    expect(await page.locator("body").textContent()).toContain(
      `The authorization server of MCP server "${server}" refused the sign-in: access_denied.`,
    );
    await screenshot(page, "mcp-oauth-refused");
    expect((await serverStatus())?.signIn).toBe("needed");
    expect(oauth.issued).toEqual([]);
    // The refusal's page is a 400 document, which Chromium logs; nothing else went wrong.
    expectNoProblems(owner, [/status of 400 \(Bad Request\)/]);
    owner.problems.length = 0;
  });

  it("signs in from the card's Connect, through the authorization server's page and back", async () => {
    const authorize = await connect();
    expect(authorize.searchParams.get("redirect_uri")).toBe(
      `http://127.0.0.1:${app.port}/oauth/mcp/callback`,
    );
    expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorize.searchParams.get("resource")).toBe(oauth.url);
    expect(oauth.registrations).toBeGreaterThanOrEqual(1);
    await screenshot(page, "mcp-oauth-consent");

    await page.getByRole("button", { name: "Approve" }).click();
    // Back through the app's callback to the Plugins page, the server's card open with the outcome.
    await page.waitForURL(`http://127.0.0.1:${app.port}/settings/plugins`);
    await card().locator("[data-status]").waitFor();
    expect(await card().locator("[data-status]").textContent()).toBe(
      `Signed in to the MCP server "${server}".`,
    );
    expect(oauth.issued.length).toBe(2);

    // The runner connects the server with its new token: the card shows it running, its tool listed.
    await vi.waitFor(
      async () => {
        await page.reload();
        await card().locator("[data-server-state]").waitFor();
        expect(await card().locator("[data-server-state]").textContent()).toBe("running");
      },
      { timeout: 20_000, interval: 500 },
    );
    expect(await card().locator("[data-sign-in]").count()).toBe(0);
    expect(await card().locator("[data-last-error]").count()).toBe(0);
    await card().locator('[data-tool="whoami"]').waitFor();
    expect(await card().locator("[data-connect]").textContent()).toContain("Signed in.");
    expect(await card().locator("[data-connect] button").textContent()).toBe("Sign in again");
    await screenshot(page, "plugins-mcp-signed-in");
    expectNoProblems(owner);
  });

  it("runs the server's tool for the model with the token the sign-in bought", async () => {
    fake.reset();
    fake.enqueue(
      toolTurn("run_plugin_tool", { plugin: server, tool: "whoami", parameters: "{}" }),
      textTurn("done"),
    );
    const reply = await chat(app, "who am I to that server?");
    expect(reply.body.response).toMatch(/done$/);
    const last = fake.requests[1]!.body.messages.at(-1)!.content as Record<string, unknown>[];
    const result = last.find((block) => block.type === "tool_result");
    expect(JSON.stringify(result)).toContain("you are signed in");
    expect(oauth.calls.length).toBe(1);
    expect(oauth.issued).toContain(oauth.calls[0]);
  });

  it("never puts a token on a page or in an answer the browser was given", async () => {
    await page.goto("/settings/plugins");
    await card().locator('[data-tool="whoami"]').waitFor();
    documents.push(await page.content());
    expect(oauth.issued.length).toBeGreaterThanOrEqual(2);
    expect(documents.length).toBeGreaterThan(3);
    const everything = documents.join("\n");
    for (const token of oauth.issued) expect(everything).not.toContain(token);
  });
});
