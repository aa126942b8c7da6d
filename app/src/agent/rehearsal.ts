import type { AgentMessage } from "@mariozechner/pi-agent-core";
import type { Database } from "../db/database.js";
import { InboxStore, finishChange } from "../db/inbox.js";
import { UsageMeter } from "../usage/meter.js";
import { ConversationStore } from "./conversation.js";

class Rehearsed extends Error {}

/**
 * Runs a turn's writes once, with the product's own stores, in a transaction that is rolled back:
 * the inbox inserts (both kinds), the messages with the turn's end and a usage row. The first real turn then
 * finds them planned and, on PGlite, the WebAssembly they run compiled (it compiles each function
 * the first time it runs). Nothing is kept but a gap in the id sequences. Never throws.
 */
export async function rehearseTurnWrites(db: Database, timezone: string): Promise<void> {
  try {
    await db.transaction(async (tx) => {
      const inbox = new InboxStore(tx);
      const { entry } = await inbox.add(null, null, { message: "rehearsal", attachments: [] }, undefined, {
        start: true,
      });
      // The next message's insert too, with the id the first one drew.
      await inbox.reserve(null, null, { message: "rehearsal", attachments: [] })?.saved;
      const conversation = new ConversationStore(tx);
      const now = Date.now();
      const messages: AgentMessage[] = [
        { role: "user", content: "rehearsal", timestamp: now },
        {
          role: "toolResult",
          toolCallId: "rehearsal",
          toolName: "rehearsal",
          content: [],
          isError: false,
          timestamp: now,
        },
      ];
      for (const message of messages) await conversation.save(message, entry.id, { defer: true });
      const meter = new UsageMeter(tx, {}, timezone);
      meter.record({
        kind: "turn",
        model: "rehearsal",
        inputTokens: 0,
        outputTokens: 0,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        costUsd: 0,
      });
      await meter.writeWith((usage) =>
        conversation.flush([finishChange(entry.id, "done", "rehearsal", undefined, true), ...usage]),
      );
      throw new Rehearsed();
    });
  } catch {
    // Rolled back, as meant (or the database refused: the first turn will tell).
  }
}
