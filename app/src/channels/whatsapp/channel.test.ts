import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ServiceError, silentLogger, type ServiceClient } from "@stavrobot/common";
import { watchConnection, whatsappChannel } from "./channel.js";

/** A bridge client answering `/health` with what the test set. */
function bridgeSaying(health: { current: Record<string, unknown> | Error }): ServiceClient {
  return {
    request: async () => {
      if (health.current instanceof Error) throw health.current;
      return { status: 200, data: { status: "ok", ...health.current } };
    },
  } as unknown as ServiceClient;
}

describe("the WhatsApp watcher", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("tells the owner once per breakage, and again after it was open in between", async () => {
    const health: { current: Record<string, unknown> | Error } = { current: { whatsapp: "open" } };
    const told: { text: string; key: string }[] = [];
    const avoided: (string | undefined)[] = [];
    const stop = watchConnection(
      {
        whatsappBridge: bridgeSaying(health),
        tellOwner: async (text, key, _about, except) => {
          told.push({ text, key });
          avoided.push(except);
        },
        publicHostname: "https://bot.example",
        logger: silentLogger,
      },
      1_000,
    );
    await vi.advanceTimersByTimeAsync(1_000);
    expect(told).toEqual([]);
    health.current = {
      whatsapp: "loggedOut",
      problem: "The phone logged this device out",
      lastErrorAt: "2026-01-01T00:00:00.000Z",
    };
    await vi.advanceTimersByTimeAsync(3_000);
    expect(told).toEqual([
      {
        text: "WhatsApp logged the assistant's number out: The phone logged this device out. Messages to WhatsApp wait until it is open again; the WhatsApp page is at https://bot.example/settings/whatsapp.",
        key: "whatsapp-state:loggedOut:2026-01-01T00:00:00.000Z",
      },
    ]);
    // The bridge not answering says nothing new (the doctor and Home say it); then failing does.
    health.current = new ServiceError("connection refused");
    await vi.advanceTimersByTimeAsync(1_000);
    health.current = { whatsapp: "open" };
    await vi.advanceTimersByTimeAsync(1_000);
    health.current = {
      whatsapp: "failing",
      problem: "keeps closing",
      lastErrorAt: "2026-01-01T01:00:00.000Z",
    };
    await vi.advanceTimersByTimeAsync(2_000);
    expect(told).toHaveLength(2);
    expect(told[1]?.text).toMatch(/^the WhatsApp connection keeps failing: keeps closing\./);
    // Never by WhatsApp itself: it would wait there for the connection it tells of.
    expect(avoided).toEqual(["whatsapp", "whatsapp"]);
    stop();
  });
});

describe("the WhatsApp channel's doctor check", () => {
  it("says what to do for each way it does not work", () => {
    expect(whatsappChannel.check({ configured: true, bridgeOk: false, whatsapp: "unknown" })).toMatchObject({
      state: "fail",
      detail: "the WhatsApp bridge does not answer",
    });
    expect(
      whatsappChannel.check({ configured: true, bridgeOk: true, whatsapp: "outdated", problem: "405" }),
    ).toMatchObject({ state: "fail", fix: expect.stringContaining("[whatsapp] version") });
    expect(whatsappChannel.check({ configured: true, bridgeOk: true, whatsapp: "unlinked" })).toMatchObject({
      state: "fail",
      fix: expect.stringContaining("WhatsApp page"),
    });
    expect(whatsappChannel.check({ configured: true, bridgeOk: true, whatsapp: "open" })).toMatchObject({
      state: "ok",
    });
  });
});
