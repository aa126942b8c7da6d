import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { OAuthCredentials } from "@mariozechner/pi-ai/oauth";
import { silentLogger } from "@stavrobot/common";
import { createApiKeySource } from "../src/model/model.js";
import { CredentialsFile } from "../src/auth/credentials-file.js";
import { NO_KEY_REASONS, OAuthKeys, isTransient } from "../src/auth/oauth-keys.js";
import { startFakeOAuth, type FakeOAuth } from "./helpers/fake-oauth.js";
import { rerouteFetch } from "./helpers/reroute-fetch.js";

// pi-ai's own Anthropic provider refreshes the tokens; its token endpoint is this loopback fake.
let oauth: FakeOAuth;
let restoreFetch: () => void;
let dir: string;
let path: string;
let keys: OAuthKeys;

const LOGIN_URL = "http://assistant.test/login";
const HOUR = 3_600_000;

beforeAll(async () => {
  oauth = await startFakeOAuth();
  restoreFetch = rerouteFetch({ "https://platform.claude.com": oauth.url });
});

afterAll(async () => {
  restoreFetch();
  await oauth.close();
});

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "stavrobot-keys-"));
  path = join(dir, "auth.json");
  oauth.tokenRequests.length = 0;
  keys = new OAuthKeys({
    file: new CredentialsFile(path),
    logger: silentLogger,
    retryDelaysMs: [10, 10, 10],
  });
});

afterEach(() => {
  keys.stop();
  rmSync(dir, { recursive: true, force: true });
});

function store(entries: Record<string, unknown>): void {
  writeFileSync(path, JSON.stringify(entries));
}

function stored(): Record<string, OAuthCredentials> {
  return JSON.parse(readFileSync(path, "utf8")) as Record<string, OAuthCredentials>;
}

const expiredGrant = (): OAuthCredentials => ({ ...oauth.grant(), expires: Date.now() - 1000 });

describe("keys from authFile", () => {
  it("hands out a valid access token without asking the provider", async () => {
    const grant = oauth.grant();
    store({ anthropic: { ...grant, expires: Date.now() + HOUR } });
    expect(await keys.getApiKey("anthropic")).toBe(grant.access);
    expect(oauth.tokenRequests).toHaveLength(0);
  });

  it("renews expired credentials and writes them back atomically, mode 600, keeping other providers", async () => {
    const old = expiredGrant();
    store({ anthropic: old, "other-provider": { access: "a", refresh: "r", expires: 1 } });
    const key = await keys.getApiKey("anthropic");
    expect(oauth.tokenRequests).toEqual([
      expect.objectContaining({ grant_type: "refresh_token", refresh_token: old.refresh }),
    ]);
    const now = stored();
    expect(key).toBe(now.anthropic?.access);
    expect(key).not.toBe(old.access);
    expect(now.anthropic?.expires).toBeGreaterThan(Date.now());
    expect(now["other-provider"]).toEqual({ access: "a", refresh: "r", expires: 1 });
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it("renews once when several requests find the credentials expired (refresh tokens rotate)", async () => {
    store({ anthropic: expiredGrant() });
    const got = await Promise.all([1, 2, 3, 4].map(() => keys.getApiKey("anthropic")));
    expect(oauth.tokenRequests).toHaveLength(1);
    expect(new Set(got).size).toBe(1);
    expect(got[0]).toBe(stored().anthropic?.access);
  });

  it("gives no key, and says so, when the provider refuses to renew (no retry for a 400)", async () => {
    store({ anthropic: { access: "sk-ant-oat01-old", refresh: "never-issued", expires: Date.now() - 1000 } });
    await expect(keys.getApiKey("anthropic")).resolves.toBeUndefined();
    expect(oauth.tokenRequests).toHaveLength(1);
    expect(keys.missingKeyMessage("anthropic", LOGIN_URL)).toBe(
      `Authentication required. Visit ${LOGIN_URL} to log in. (${NO_KEY_REASONS.refused})`,
    );
    // The credentials stay: the owner may still fix things by logging in.
    expect(stored().anthropic?.refresh).toBe("never-issued");
  });

  it("retries a renewal that failed for a passing reason", async () => {
    store({ anthropic: expiredGrant() });
    oauth.failNext(503, 2);
    const key = await keys.getApiKey("anthropic");
    expect(oauth.tokenRequests).toHaveLength(3);
    expect(key).toBe(stored().anthropic?.access);
  });

  it("gives up after the retries when the provider stays unreachable", async () => {
    store({ anthropic: expiredGrant() });
    oauth.failNext(502, 4);
    await expect(keys.getApiKey("anthropic")).resolves.toBeUndefined();
    expect(oauth.tokenRequests).toHaveLength(4);
    expect(keys.missingKeyMessage("anthropic", LOGIN_URL)).toContain(NO_KEY_REASONS.unreachable);
  });

  it("treats a missing file as no login, and finds a saved login at once (creating the file, mode 600)", async () => {
    await expect(keys.getApiKey("anthropic")).resolves.toBeUndefined();
    expect(keys.missingKeyMessage("anthropic", LOGIN_URL)).toContain(NO_KEY_REASONS.noLogin);
    const grant = { ...oauth.grant(), expires: Date.now() + HOUR };
    await keys.save("anthropic", grant);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(await keys.getApiKey("anthropic")).toBe(grant.access);
    expect(keys.missingKeyMessage("anthropic", LOGIN_URL)).toBe(
      `Authentication required. Visit ${LOGIN_URL} to log in.`,
    );
  });

  it("gives no key for an unreadable file, and does not throw", async () => {
    writeFileSync(path, "{ not json");
    await expect(keys.getApiKey("anthropic")).resolves.toBeUndefined();
    expect(keys.missingKeyMessage("anthropic", LOGIN_URL)).toContain(NO_KEY_REASONS.unreadable);
    store({ anthropic: { access: 42 } });
    await expect(keys.getApiKey("anthropic")).resolves.toBeUndefined();
  });

  it("gives no key for a provider without a subscription login, and points to apiKey", async () => {
    store({ openai: { ...oauth.grant(), expires: Date.now() + HOUR } });
    await expect(keys.getApiKey("openai")).resolves.toBeUndefined();
    expect(keys.missingKeyMessage("openai", LOGIN_URL)).toMatch(/no subscription login.*set apiKey/);
  });

  it("keeps renewed credentials in memory when the file cannot be written, and writes them later", async () => {
    const old = expiredGrant();
    store({ anthropic: old });
    const file = new CredentialsFile(path);
    let refuseWrites = true;
    const original = file.update.bind(file);
    file.update = (provider, change) =>
      refuseWrites
        ? Promise.reject(new Error("ENOSPC: no space left on device"))
        : original(provider, change);
    const flaky = new OAuthKeys({ file, logger: silentLogger, retryDelaysMs: [] });
    const key = await flaky.getApiKey("anthropic");
    expect(key).toBeDefined();
    expect(stored().anthropic?.refresh).toBe(old.refresh);
    // The old refresh token is dead now: the renewed credentials must be the ones used.
    expect(await flaky.getApiKey("anthropic")).toBe(key);
    expect(oauth.tokenRequests).toHaveLength(1);
    refuseWrites = false;
    expect(await flaky.getApiKey("anthropic")).toBe(key);
    expect(stored().anthropic?.access).toBe(key);
  });

  it("does not overwrite a login saved while a renewal was running", async () => {
    store({ anthropic: expiredGrant() });
    const slow = new OAuthKeys({
      file: new CredentialsFile(path),
      logger: silentLogger,
      retryDelaysMs: [300],
    });
    oauth.failNext(503, 1);
    const renewing = slow.getApiKey("anthropic");
    // The first attempt failed; the retry comes after the owner logged in.
    await expect.poll(() => oauth.tokenRequests.length).toBe(1);
    const fresh = { ...oauth.grant(), expires: Date.now() + HOUR };
    await slow.save("anthropic", fresh);
    await renewing;
    expect(oauth.tokenRequests).toHaveLength(2);
    expect(stored().anthropic).toEqual(fresh);
    expect(await slow.getApiKey("anthropic")).toBe(fresh.access);
  });

  it("renews in the background before the credentials expire", async () => {
    const soon = { ...oauth.grant(), expires: Date.now() + 1000 };
    store({ anthropic: soon });
    const background = new OAuthKeys({
      file: new CredentialsFile(path),
      logger: silentLogger,
      refreshIntervalMs: 50,
    });
    background.start("anthropic");
    try {
      await expect.poll(() => stored().anthropic?.refresh, { timeout: 5_000 }).not.toBe(soon.refresh);
    } finally {
      background.stop();
    }
  });

  it("removes the credentials a 401 was about, once, and not a newer login", async () => {
    const grant = { ...oauth.grant(), expires: Date.now() + HOUR };
    store({ anthropic: grant, other: { access: "a", refresh: "r", expires: 1 } });
    await keys.getApiKey("anthropic");
    expect(await keys.invalidate("anthropic")).toEqual(grant);
    expect(stored()).toEqual({ other: { access: "a", refresh: "r", expires: 1 } });
    expect(await keys.invalidate("anthropic")).toBeUndefined();
    await expect(keys.getApiKey("anthropic")).resolves.toBeUndefined();
    expect(keys.missingKeyMessage("anthropic", LOGIN_URL)).toContain(NO_KEY_REASONS.revoked);

    // A login replaced the refused credentials before a late 401 arrived: the new login stays.
    const first = { ...oauth.grant(), expires: Date.now() + HOUR };
    await keys.save("anthropic", first);
    await keys.getApiKey("anthropic");
    const second = { ...oauth.grant(), expires: Date.now() + HOUR };
    await keys.save("anthropic", second);
    expect(await keys.invalidate("anthropic")).toBeUndefined();
    expect(stored().anthropic).toEqual(second);
  });

  it("classifies renewal errors as pi-ai words them", () => {
    expect(isTransient(new Error("details=Error: HTTP request failed. status=503; url=x"))).toBe(true);
    expect(isTransient(new Error("details=Error: HTTP request failed. status=429; url=x"))).toBe(true);
    expect(isTransient(new Error("details=TypeError: fetch failed; cause=ECONNREFUSED"))).toBe(true);
    expect(isTransient(new Error("details=Error: HTTP request failed. status=400; body={}"))).toBe(false);
    expect(isTransient(new Error("details=Error: HTTP request failed. status=401; body={}"))).toBe(false);
  });
});

describe("createApiKeySource", () => {
  it("prefers apiKey, then authFile, then the environment, then a placeholder for a custom endpoint", async () => {
    const logger = silentLogger;
    expect(await createApiKeySource({ apiKey: "sk-1" }, { logger }).getApiKey("anthropic")).toBe("sk-1");
    const grant = { ...oauth.grant(), expires: Date.now() + HOUR };
    store({ anthropic: grant });
    const fromFile = createApiKeySource({ authFile: path }, { logger });
    expect(fromFile.oauth).toBeDefined();
    expect(await fromFile.getApiKey("anthropic")).toBe(grant.access);
    const none = createApiKeySource({}, { logger });
    expect(none.oauth).toBeUndefined();
    expect(await none.getApiKey("no-such-provider")).toBeUndefined();
    expect(
      await createApiKeySource({ baseUrl: "http://127.0.0.1:1/v1" }, { logger }).getApiKey("local"),
    ).toBe("no-key");
  });

  it("never rejects, whatever the file holds", async () => {
    const source = createApiKeySource(
      { authFile: join(dir, "missing-dir", "auth.json") },
      { logger: silentLogger },
    );
    await expect(source.getApiKey("anthropic")).resolves.toBeUndefined();
    const onDirectory = createApiKeySource({ authFile: dir }, { logger: silentLogger });
    await expect(onDirectory.getApiKey("anthropic")).resolves.toBeUndefined();
    expect(onDirectory.oauth?.missingKeyMessage("anthropic", LOGIN_URL)).toContain(NO_KEY_REASONS.unreadable);
  });
});
