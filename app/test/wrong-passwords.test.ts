import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { basicAuthHeader, createLogger } from "@stavrobot/common";
import { startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { raw } from "./helpers/http.js";

/**
 * Wrong passwords on the external port, against the app: each one logged with the client's
 * address (never what was sent), and after five the address is answered 429 with Retry-After,
 * whatever it sends, on every route that takes the owner's password.
 */
let fake: FakeLlmServer;
let env: TestEnv;
let app: RunningApp;
const lines: string[] = [];

beforeAll(async () => {
  fake = await startFakeAnthropic();
  env = await createTestEnv(configFor(fake));
  app = await startApp({ env: env.env, logger: createLogger("app", "info", (line) => lines.push(line)) });
});

afterAll(async () => {
  await app?.close();
  await fake?.close();
  await env?.cleanup();
});

describe("wrong passwords", () => {
  it("are logged with the address, then the address is held back with 429 and Retry-After", async () => {
    await app.db.query(
      "INSERT INTO pages (path, mimetype, data, is_public, queries) VALUES ('private-notes', 'text/html', '<p>mine</p>', false, '{}')",
    );
    // A request without a password is no guess.
    expect((await raw(app.port, "GET", "/api/status", { auth: null })).status).toBe(401);
    const guesses = ["/api/status", "/health?deep=1", "/pages/private-notes", "/usage", "/nothing-here"];
    for (const [index, path] of guesses.entries()) {
      const answer = await raw(app.port, "GET", path, { auth: basicAuthHeader(`guess-number-${index}`) });
      expect(answer.status, path).toBe(401);
    }
    const logged = lines.filter((line) => line.includes("wrong password"));
    expect(logged).toHaveLength(5);
    for (const line of logged) {
      expect(line).toMatch(/WARN \[app:http:auth\] wrong password/);
      expect(line).toContain('"address":"127.0.0.1"');
      expect(line).not.toMatch(/guess-number|Basic /);
    }

    const held = await raw(app.port, "GET", "/api/status", { auth: basicAuthHeader("guess-number-6") });
    expect(held.status).toBe(429);
    expect(held.headers["retry-after"]).toBe("30");
    expect(held.json).toMatchObject({ kind: "rate-limited", reason: "too-many-wrong-passwords" });
    expect(held.json.error).toContain("try again in 30 s");
    // Not even the right password is checked while held back; the open routes stay open.
    expect((await raw(app.port, "GET", "/api/status")).status).toBe(429);
    expect((await raw(app.port, "GET", "/health", { auth: null })).status).toBe(200);
    expect(lines.filter((line) => line.includes("wrong password"))).toHaveLength(5);
  });
});
