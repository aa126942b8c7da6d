import { describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { PASSWORD, post, useTestApp } from "./helpers/app.js";

/* An owner with no push channel hears about someone with no agent on their console. */

describe("a message from someone with no agent, for an owner without a push channel", () => {
  const t = useTestApp();
  const get = async (path: string) =>
    (await (
      await fetch(`http://127.0.0.1:${t.app.port}${path}`, {
        headers: { Authorization: basicAuthHeader(PASSWORD) },
      })
    ).json()) as Record<string, unknown>;

  it("is kept as one notice a day for the owner's console, and runs no turn", async () => {
    const allowed = await fetch(`http://127.0.0.1:${t.app.port}/api/settings/allowlist`, {
      method: "PUT",
      headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
      body: JSON.stringify({ signal: ["+15550007777"], telegram: [], whatsapp: [], email: [] }),
    });
    expect(allowed.status).toBe(200);
    for (const message of ["Is this the bakery?", "Hello?"]) {
      const sent = await post(t.app.port, "/chat", { source: "signal", sender: "+15550007777", message });
      expect(sent.status).toBe(200);
      expect(sent.body.response ?? "").toBe("");
    }
    expect(t.fake.requests).toHaveLength(0);
    const { answers } = (await get("/api/answers/pending")) as {
      answers: { source: string; response: string }[];
    };
    const notices = answers.filter((answer) => answer.source === "people");
    expect(notices).toHaveLength(1);
    expect(notices[0]?.response).toContain("Signal +15550007777");
    expect(notices[0]?.response).toContain("Is this the bakery?");
    expect(notices[0]?.response).toContain("no interlocutor record");
    const kept = await t.app.db.query("SELECT 1 FROM inbox WHERE sender = '+15550007777'");
    expect(kept.rows).toHaveLength(0);
  });
});
