import { describe, expect, it } from "vitest";
import { silentLogger } from "@stavrobot/common";
import type { InboxEntry } from "../db/inbox.js";
import { CurrentTurn } from "../queue/current-turn.js";
import type { ApprovalStore } from "./approvals.js";
import { TrustGate, type TrustGateDeps } from "./gate.js";

/** A gate with a turn of `entry` begun; what it told the owner and asked of them. */
async function gateFor(
  entry: Pick<InboxEntry, "source" | "sender" | "payload">,
  deps: Partial<TrustGateDeps> = {},
  summaryOrigins?: string,
) {
  const told: string[] = [];
  const asked: string[] = [];
  const currentTurn = new CurrentTurn();
  currentTurn.set({ id: 9, receivedAt: new Date(), status: "processing", attempts: 0, ...entry });
  const gate = new TrustGate({
    currentTurn,
    owner: { telegram: "1001" },
    approvals: {
      add: async (call: { tool: string }) => (asked.push(call.tool), asked.length),
    } as unknown as ApprovalStore,
    tellOwner: async (text) => void told.push(text),
    allow: [],
    ownerName: "Ada",
    logger: silentLogger,
    ...deps,
  });
  await gate.begin(9, [{ role: "user", content: "x", timestamp: 0 }], { summary: summaryOrigins });
  return { gate, told, asked, currentTurn };
}

const FROM_PLUGIN = {
  source: "plugin:mail/check",
  sender: null,
  payload: { message: "mail", attachments: [] },
};
const FROM_OWNER = { source: "telegram", sender: "1001", payload: { message: "hi", attachments: [] } };
const forecast = { plugin: "weather", tool: "forecast", parameters: "{}" };

describe("the trust gate", () => {
  it("lets a plugin tool the owner says only reads run in a turn nobody started", async () => {
    const plain = await gateFor(FROM_PLUGIN);
    expect(await plain.gate.check("run_plugin_tool", forecast)).toMatch(/^Not run: .*nobody is here/);
    expect(plain.told).toHaveLength(1);

    const rules = ["weather/forecast", "weather", "github/search"];
    for (const rule of rules.slice(0, 2)) {
      const allowed = await gateFor(FROM_PLUGIN, {
        readOnly: async (plugin, tool) => [plugin, `${plugin}/${tool}`].includes(rule),
      });
      expect(await allowed.gate.check("run_plugin_tool", forecast)).toBeUndefined();
    }
    const other = await gateFor(FROM_PLUGIN, {
      readOnly: async (plugin, tool) => `${plugin}/${tool}` === rules[2],
    });
    expect(await other.gate.check("run_plugin_tool", forecast)).toBeDefined();
  });

  it("weighs the summary of earlier conversation like history, and says so", async () => {
    const { gate, asked, told, currentTurn } = await gateFor(FROM_OWNER, {}, "plugin:mail/check, web_fetch");
    expect(currentTurn.outside).toBe("plugin:mail/check, web_fetch");
    // The owner's own data may still be worked on; an outward act waits.
    expect(await gate.check("manage_knowledge", { action: "upsert" })).toBeUndefined();
    expect(await gate.check("run_python", { code: "print(1)" })).toMatch(/waits for the owner's approval/);
    expect(asked).toEqual(["run_python"]);
    expect(told[0]).toContain("plugin:mail/check (in the summary of earlier conversation)");
    gate.end();
    expect(currentTurn.outside).toBeUndefined();
  });

  it("marks the turn when a result says it holds stored outside text", async () => {
    const { gate, currentTurn } = await gateFor(FROM_OWNER);
    expect(currentTurn.outside).toBeUndefined();
    expect(gate.observe("db_search", "found", {})).toBeUndefined();
    expect(gate.observe("db_search", "found", { outside: "Bob (signal +1555)" })).toEqual({
      kind: "outside",
      from: "Bob (signal +1555)",
    });
    expect(currentTurn.outside).toBe("Bob (signal +1555)");
    expect(await gate.check("run_python", { code: "1" })).toBeDefined();
  });

  it("labels a reminder's turn with where the reminder's words came from", async () => {
    const { gate, told } = await gateFor({
      source: "cron:4",
      sender: null,
      payload: { message: "remind", attachments: [], outside: "web_fetch" },
    });
    expect(await gate.check("send_telegram_message", { recipient: "2002", message: "x" })).toMatch(
      /nobody is here/,
    );
    expect(told[0]).toContain("web_fetch (in a reminder)");
  });
});
