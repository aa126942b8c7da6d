import { describe, expect, it } from "vitest";
import { signalSendRequestSchema } from "@stavrobot/common";
import { attachmentName } from "./attachments.js";
import { rateLimitOf, sendFailureOf } from "./send-results.js";

describe("attachmentName", () => {
  it("uses the sender's file name, made safe", () => {
    expect(attachmentName({ id: "abc.jpg", filename: "cat.jpg" }, "image/jpeg")).toBe("cat.jpg");
    expect(attachmentName({ id: "abc.pdf", filename: "../secret/plan.pdf" }, "application/pdf")).toBe(
      "plan.pdf",
    );
  });

  it("names audio without a file name as a voice note, by the stored extension or the MIME type", () => {
    expect(attachmentName({ id: "xyz.aac", filename: null }, "audio/aac")).toBe("voice-note.aac");
    expect(attachmentName({ id: "xyz", filename: null }, "audio/mpeg")).toBe("voice-note.mp3");
    expect(attachmentName({ id: "xyz", filename: null }, "audio/x-weird")).toBe("voice-note.xweird");
  });

  it("falls back to signal-cli's id, adding an extension only when it has none", () => {
    expect(attachmentName({ id: "Qm9i.png", filename: null }, "image/png")).toBe("Qm9i.png");
    expect(attachmentName({ id: "Qm9i", filename: null }, "image/png")).toBe("Qm9i.png");
    expect(attachmentName({ id: "Qm9i", filename: null }, "application/x-unknown")).toBe("Qm9i");
  });
});

describe("send results", () => {
  const limited = {
    response: {
      timestamp: 1,
      results: [
        {
          recipientAddress: { number: "+1555" },
          type: "RATE_LIMIT_FAILURE",
          token: "t-1",
          retryAfterSeconds: 86400,
        },
      ],
    },
  };

  it("finds a rate limit in an error's data, or by its code alone", () => {
    expect(rateLimitOf(limited, -5)).toEqual({ retryAfterSeconds: 86400, token: "t-1" });
    expect(rateLimitOf(limited, -1)).toEqual({ retryAfterSeconds: 86400, token: "t-1" });
    expect(rateLimitOf(null, -5)).toEqual({ retryAfterSeconds: 60, token: undefined });
    expect(rateLimitOf({ response: { results: [{ type: "NETWORK_FAILURE" }] } }, -1)).toBeUndefined();
  });

  it("treats a result without any success as a failure", () => {
    expect(sendFailureOf({ timestamp: 1, results: [{ type: "SUCCESS" }] })).toBeUndefined();
    expect(sendFailureOf({ timestamp: 1 })).toBeUndefined();
    expect(sendFailureOf(limited.response)).toMatchObject({ kind: "rate-limit", token: "t-1" });
    const failure = sendFailureOf({ results: [{ type: "UNREGISTERED_FAILURE" }] });
    expect(failure?.kind === "error" && failure.error.kind).toBe("upstream");
  });
});

describe("the /send contract", () => {
  it("measures the attachment without decoding it and refuses what is not base64 or too large", () => {
    const ok = signalSendRequestSchema.safeParse({ recipient: "+15555550123", attachment: "aGk=" });
    expect(ok.success).toBe(true);
    expect(signalSendRequestSchema.safeParse({ recipient: "+15555550123", attachment: "a" }).success).toBe(
      false,
    );
    const huge = "A".repeat(Math.ceil((25 * 1024 * 1024 + 3) / 3) * 4);
    expect(signalSendRequestSchema.safeParse({ recipient: "+15555550123", attachment: huge }).success).toBe(
      false,
    );
  });
});
