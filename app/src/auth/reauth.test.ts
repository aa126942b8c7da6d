import { describe, expect, it } from "vitest";
import type { OAuthCredentials } from "@mariozechner/pi-ai/oauth";
import { silentLogger } from "@stavrobot/common";
import type { OwnerContact } from "../audience.js";
import { createReauthHandler, isAuthFailure } from "./reauth.js";

const REFUSED_401 =
  '401 {"type":"error","error":{"type":"authentication_error","message":"OAuth token revoked"}}';
const CREDENTIALS: OAuthCredentials = { access: "sk-ant-oat01-a", refresh: "sk-ant-ort01-r", expires: 1 };

function setUp(owner: OwnerContact, removals: (OAuthCredentials | undefined)[]) {
  const told: { channel: string; recipient: string; text: string; key: string }[] = [];
  const notices: string[] = [];
  const handle = createReauthHandler({
    provider: "anthropic",
    keys: { invalidate: async () => removals.shift() },
    loginUrl: "https://assistant.example/login",
    owner,
    tell: async (channel, recipient, text, key) => void told.push({ channel, recipient, text, key }),
    notices: { addNotice: async (_source, _about, text) => void notices.push(text) },
    logger: silentLogger,
  });
  return { handle, told, notices };
}

describe("the provider's 401", () => {
  it("is recognised by status or by Anthropic's error type, and nothing else is", () => {
    expect(isAuthFailure(REFUSED_401)).toBe(true);
    expect(isAuthFailure("401 Unauthorized")).toBe(true);
    expect(isAuthFailure('403 {"type":"error","error":{"type":"authentication_error","message":"x"}}')).toBe(
      true,
    );
    expect(isAuthFailure('429 {"type":"error","error":{"type":"rate_limit_error"}}')).toBe(false);
    expect(isAuthFailure("500 something about 401 tokens")).toBe(false);
  });

  it("sends the owner the login link on their push channel, keyed by the removed credentials", async () => {
    const { handle, told, notices } = setUp({ telegram: "1001", signal: "+15550000001" }, [CREDENTIALS]);
    await handle(REFUSED_401);
    expect(told).toEqual([
      {
        channel: "telegram",
        recipient: "1001",
        text: expect.stringContaining("log in again: https://assistant.example/login"),
        key: expect.stringMatching(/^login:anthropic:[0-9a-f]{16}$/),
      },
    ]);
    expect(notices).toEqual([]);
    // Nothing left to remove: nothing sent.
    await handle(REFUSED_401);
    expect(told).toHaveLength(1);
  });

  it("gives the same delivery key for the same credentials, so a race queues the link once", async () => {
    const { handle, told } = setUp({ signal: "+15550000001" }, [CREDENTIALS, { ...CREDENTIALS }]);
    await handle(REFUSED_401);
    await handle(REFUSED_401);
    expect(told.map((t) => t.channel)).toEqual(["signal", "signal"]);
    expect(told[0]?.key).toBe(told[1]?.key);
  });

  it("leaves a console notice when the owner has no push channel, and ignores other errors", async () => {
    const { handle, told, notices } = setUp({}, [CREDENTIALS]);
    await handle('400 {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}');
    expect(notices).toEqual([]);
    await handle(REFUSED_401);
    expect(told).toEqual([]);
    expect(notices).toEqual([expect.stringContaining("https://assistant.example/login")]);
  });

  it("does not throw when the owner cannot be told", async () => {
    const handle = createReauthHandler({
      provider: "anthropic",
      keys: { invalidate: async () => CREDENTIALS },
      loginUrl: "https://assistant.example/login",
      owner: {},
      tell: async () => undefined,
      notices: { addNotice: () => Promise.reject(new Error("database down")) },
      logger: silentLogger,
    });
    await expect(handle(REFUSED_401)).resolves.toBeUndefined();
  });
});
