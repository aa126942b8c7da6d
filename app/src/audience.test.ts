import { describe, expect, it } from "vitest";
import { destinationFor, ownerDestination } from "./audience.js";

const everywhere = {
  telegram: "123456789",
  signal: "+15550001111",
  whatsapp: "+15550002222",
  email: "ada@example.org",
};

describe("where the owner is reached", () => {
  it("prefers Telegram, then Signal, then WhatsApp, then email, else the console", () => {
    expect(ownerDestination(everywhere)).toEqual({
      kind: "channel",
      channel: "telegram",
      recipient: "123456789",
    });
    expect(ownerDestination({ ...everywhere, telegram: undefined })).toEqual({
      kind: "channel",
      channel: "signal",
      recipient: "+15550001111",
    });
    expect(ownerDestination({ whatsapp: "+15550002222", email: "ada@example.org" })).toEqual({
      kind: "channel",
      channel: "whatsapp",
      recipient: "+15550002222",
    });
    expect(ownerDestination({ email: "ada@example.org" })).toEqual({
      kind: "channel",
      channel: "email",
      recipient: "ada@example.org",
    });
    expect(ownerDestination({})).toEqual({ kind: "console" });
  });

  it("skips the channel a notice is about: WhatsApp's breakage goes by another channel or the console", () => {
    expect(ownerDestination({ whatsapp: "+15550002222", email: "ada@example.org" }, "whatsapp")).toEqual({
      kind: "channel",
      channel: "email",
      recipient: "ada@example.org",
    });
    expect(ownerDestination({ whatsapp: "+15550002222" }, "whatsapp")).toEqual({ kind: "console" });
    expect(ownerDestination(everywhere, "whatsapp")).toMatchObject({ channel: "telegram" });
  });

  it("answers a turn nobody started (a cron entry) on the owner's WhatsApp when that is their first channel", () => {
    expect(destinationFor({ source: "cron:4", sender: null }, { whatsapp: "+15550002222" })).toEqual({
      kind: "channel",
      channel: "whatsapp",
      recipient: "+15550002222",
    });
  });
});
