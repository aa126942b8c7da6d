import type { Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HttpError,
  Router,
  closeServer,
  createHttpServer,
  createRequestListener,
  createServiceClient,
  listen,
  silentLogger,
} from "@stavrobot/common";
import { addMcpOAuthRoutes } from "./mcp-oauth.js";

/**
 * The Connect button's route and the OAuth callback, between the owner's browser and a stand-in
 * plugin-runner on loopback that answers as the runner's contract says (the runner's own sign-in
 * is tested against a real authorization server in the runner's mcp-oauth test).
 */
const asked: { path: string; body: unknown }[] = [];
let runner: Server;
let app: Server;
let appUrl: string;
let changed = 0;

beforeAll(async () => {
  const fake = new Router()
    .post("/mcp/oauth/start", async ({ req }) => {
      const body = JSON.parse(await text(req)) as { name: string };
      asked.push({ path: "/mcp/oauth/start", body });
      if (body.name === "plain") throw new HttpError(400, 'MCP server "plain" does not sign in with OAuth.');
      return { json: { authorizationUrl: "https://as.example/authorize?state=s1" } };
    })
    .post("/mcp/oauth/finish", async ({ req }) => {
      const body = JSON.parse(await text(req)) as { state?: string };
      asked.push({ path: "/mcp/oauth/finish", body });
      if (body.state !== "s1")
        throw new HttpError(400, "The sign-in came back with a state no Connect is waiting for.");
      return { json: { name: "docs", message: 'MCP server "docs" is signed in.' } };
    });
  runner = createHttpServer(createRequestListener(fake, { logger: silentLogger }));
  const pluginRunner = createServiceClient({
    baseUrl: `http://127.0.0.1:${await listen(runner, 0)}`,
    bearer: "a-secret-of-sixteen-or-more",
  });
  const router = addMcpOAuthRoutes(new Router(), { pluginRunner, pluginsChanged: () => changed++ });
  app = createHttpServer(createRequestListener(router, { logger: silentLogger }));
  appUrl = `http://127.0.0.1:${await listen(app, 0)}`;
});

afterAll(async () => {
  await closeServer(app);
  await closeServer(runner);
});

describe("an MCP server's Connect and its OAuth callback", () => {
  it("asks the runner for the sign-in page with this app's callback at the browser's origin", async () => {
    const answer = await fetch(`${appUrl}/api/settings/plugins/mcp-connect`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: "https://bot.example" },
      body: JSON.stringify({ name: "docs" }),
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ authorizationUrl: "https://as.example/authorize?state=s1" });
    expect(asked.at(-1)).toEqual({
      path: "/mcp/oauth/start",
      body: { name: "docs", redirectUrl: "https://bot.example/oauth/mcp/callback" },
    });
  });

  it("passes the runner's refusal on with its words", async () => {
    const answer = await fetch(`${appUrl}/api/settings/plugins/mcp-connect`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "plain" }),
    });
    expect(answer.status).toBe(400);
    expect(await answer.json()).toEqual({ error: 'MCP server "plain" does not sign in with OAuth.' });
  });

  it("completes the sign-in from the callback and sends the browser back to the server's card", async () => {
    const before = changed;
    const answer = await fetch(`${appUrl}/oauth/mcp/callback?state=s1&code=c1`, { redirect: "manual" });
    expect(answer.status).toBe(303);
    expect(answer.headers.get("location")).toBe("/settings/plugins?signedIn=docs");
    expect(asked.at(-1)).toEqual({ path: "/mcp/oauth/finish", body: { state: "s1", code: "c1" } });
    expect(changed).toBe(before + 1);
  });

  it("shows a callback with a wrong state as the runner's clear error, and signs nothing in", async () => {
    const answer = await fetch(`${appUrl}/oauth/mcp/callback?state=forged&code=c1`, { redirect: "manual" });
    expect(answer.status).toBe(400);
    expect(await answer.json()).toEqual({
      error: "The sign-in came back with a state no Connect is waiting for.",
    });
  });

  it("refuses a callback whose query is too long to be real", async () => {
    const answer = await fetch(`${appUrl}/oauth/mcp/callback?state=${"x".repeat(600)}`, {
      redirect: "manual",
    });
    expect(answer.status).toBe(400);
    expect(await answer.json()).toEqual({ error: "The sign-in came back with a query too long to be real." });
  });
});

async function text(req: AsyncIterable<unknown>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
