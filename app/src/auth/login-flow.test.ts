import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  registerOAuthProvider,
  unregisterOAuthProvider,
  type OAuthCredentials,
  type OAuthLoginCallbacks,
} from "@mariozechner/pi-ai/oauth";
import { DomainError, silentLogger } from "@stavrobot/common";
import { LoginFlows, type LoginEvent } from "./login-flow.js";

/**
 * A provider registered through pi-ai's own registry. Its login does what a real one does with the
 * callbacks (an address to open, a question, progress) and is steered by the test.
 */
let calls: { callbacks: OAuthLoginCallbacks; answer?: string; error?: unknown }[];
let finishLogin: (credentials: OAuthCredentials) => void;
let failLogin: (error: Error) => void;

beforeEach(() => {
  calls = [];
  registerOAuthProvider({
    id: "test-login",
    name: "Test Login",
    async login(callbacks) {
      const call: (typeof calls)[number] = { callbacks };
      calls.push(call);
      callbacks.onAuth({ url: "https://login.example/authorize?x=1", instructions: "Approve, then paste." });
      try {
        call.answer = await callbacks.onPrompt({ message: "Paste the code:", placeholder: "code#state" });
      } catch (error) {
        call.error = error;
        throw error;
      }
      callbacks.onProgress?.("Exchanging the code...");
      return new Promise<OAuthCredentials>((resolve, reject) => {
        finishLogin = resolve;
        failLogin = reject;
      });
    },
    refreshToken: async (credentials) => credentials,
    getApiKey: (credentials) => credentials.access,
  });
});

afterEach(() => unregisterOAuthProvider("test-login"));

function recordingKeys() {
  const saved: [string, OAuthCredentials][] = [];
  return {
    saved,
    save: async (provider: string, credentials: OAuthCredentials) => void saved.push([provider, credentials]),
  };
}

function follower(flows: LoginFlows): { events: LoginEvent[]; stop: () => void } {
  const events: LoginEvent[] = [];
  const stop = flows.follow((event) => events.push(event));
  return { events, stop };
}

const types = (events: LoginEvent[]) => events.map((event) => event.type);
const CREDENTIALS = { access: "acc", refresh: "ref", expires: 1 };

describe("LoginFlows", () => {
  it("drives the provider's login: address, question, answer, progress, saved credentials", async () => {
    const keys = recordingKeys();
    const flows = new LoginFlows({ provider: "test-login", keys, logger: silentLogger });
    const page = follower(flows);
    await vi.waitFor(() => expect(types(page.events)).toEqual(["start", "auth", "prompt"]));
    expect(page.events[0]).toEqual({ type: "start", provider: "test-login", name: "Test Login" });
    expect(page.events[1]).toEqual({
      type: "auth",
      url: "https://login.example/authorize?x=1",
      instructions: "Approve, then paste.",
    });
    expect(page.events[2]).toEqual({
      type: "prompt",
      message: "Paste the code:",
      placeholder: "code#state",
      allowEmpty: false,
    });
    flows.respond("the-code#the-state");
    await vi.waitFor(() => expect(types(page.events)).toContain("progress"));
    expect(calls[0]?.answer).toBe("the-code#the-state");
    finishLogin(CREDENTIALS);
    await vi.waitFor(() => expect(types(page.events)).toContain("success"));
    expect(keys.saved).toEqual([["test-login", CREDENTIALS]]);
    expect(() => flows.respond("again")).toThrow(DomainError);
  });

  it("lets a page that reconnects follow the same login, starting from its state so far", async () => {
    const flows = new LoginFlows({ provider: "test-login", keys: recordingKeys(), logger: silentLogger });
    const first = follower(flows);
    await vi.waitFor(() => expect(types(first.events)).toContain("prompt"));
    first.stop();
    const second = follower(flows);
    expect(types(second.events)).toEqual(["start", "auth", "prompt"]);
    expect(second.events[1]).toEqual(first.events[1]);
    flows.respond("code");
    await vi.waitFor(() => expect(types(second.events)).toContain("progress"));
    // Answered: a later page sees the progress, not the question.
    const third = follower(flows);
    expect(types(third.events)).toEqual(["start", "auth", "progress"]);
    expect(calls).toHaveLength(1);
    expect(types(first.events)).toEqual(["start", "auth", "prompt"]);
    finishLogin(CREDENTIALS);
    await vi.waitFor(() => expect(types(third.events)).toContain("success"));
  });

  it("refuses an answer when nothing is asked (409) and an empty one when one is needed (400)", async () => {
    const flows = new LoginFlows({ provider: "test-login", keys: recordingKeys(), logger: silentLogger });
    expect(() => flows.respond("x")).toThrow(expect.objectContaining({ kind: "conflict" }));
    const page = follower(flows);
    await vi.waitFor(() => expect(types(page.events)).toContain("prompt"));
    expect(() => flows.respond("  ")).toThrow(expect.objectContaining({ kind: "invalid" }));
    flows.close();
  });

  it("aborts a login that takes longer than the timeout, and starts afresh afterwards", async () => {
    const flows = new LoginFlows({
      provider: "test-login",
      keys: recordingKeys(),
      logger: silentLogger,
      timeoutMs: 200,
    });
    const page = follower(flows);
    await vi.waitFor(() => expect(types(page.events)).toContain("failure"), { timeout: 3_000 });
    expect(page.events.at(-1)).toEqual({
      type: "failure",
      message: "The login was not completed within 1 second. Reload the page to start again.",
    });
    // The provider stops waiting for an answer, so it can let go of what it holds.
    await vi.waitFor(() => expect(calls[0]?.error).toBeInstanceOf(Error));
    expect(() => flows.respond("late")).toThrow(expect.objectContaining({ kind: "conflict" }));
    const next = follower(flows);
    await vi.waitFor(() => expect(types(next.events)).toEqual(["start", "auth", "prompt"]));
    expect(calls).toHaveLength(2);
    flows.close();
  });

  it("reports a login the provider failed, and a login that could not be saved", async () => {
    const flows = new LoginFlows({ provider: "test-login", keys: recordingKeys(), logger: silentLogger });
    const page = follower(flows);
    await vi.waitFor(() => expect(types(page.events)).toContain("prompt"));
    flows.respond("code");
    await vi.waitFor(() => expect(types(page.events)).toContain("progress"));
    failLogin(new Error("Token exchange failed. status=400; stack=Error: at somewhere"));
    await vi.waitFor(() =>
      expect(page.events.at(-1)).toEqual({
        type: "failure",
        message: "The login failed: Token exchange failed. status=400",
      }),
    );

    const broken = new LoginFlows({
      provider: "test-login",
      keys: { save: () => Promise.reject(new Error("EACCES: permission denied")) },
      logger: silentLogger,
    });
    const other = follower(broken);
    await vi.waitFor(() => expect(types(other.events)).toContain("prompt"));
    broken.respond("code");
    await vi.waitFor(() => expect(types(other.events)).toContain("progress"));
    finishLogin(CREDENTIALS);
    await vi.waitFor(() =>
      expect(other.events.at(-1)).toEqual({
        type: "failure",
        message: "The login failed: EACCES: permission denied",
      }),
    );
  });

  it("explains when no login is possible: no authFile, or a provider without one", async () => {
    const noFile = follower(
      new LoginFlows({ provider: "test-login", keys: undefined, logger: silentLogger }),
    );
    // Not a failure: nothing was tried, and the page says what to set without an error.
    expect(noFile.events).toEqual([
      { type: "unavailable", message: expect.stringContaining("needs authFile") },
    ]);
    const noLogin = follower(
      new LoginFlows({ provider: "no-such-provider", keys: recordingKeys(), logger: silentLogger }),
    );
    expect(noLogin.events).toEqual([
      {
        type: "unavailable",
        message: expect.stringContaining('no subscription login for the provider "no-such-provider"'),
      },
    ]);
  });
});
