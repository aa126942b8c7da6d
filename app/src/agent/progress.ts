import type { Agent } from "@mariozechner/pi-agent-core";
import type { TurnProgressEvent } from "../live/progress.js";

/** Reports what the agent writes and which tools it runs, as it happens; returns the unsubscribe. */
export function reportProgress(agent: Agent, report: (event: TurnProgressEvent) => void): () => void {
  return agent.subscribe((event) => {
    if (event.type === "message_update" && event.assistantMessageEvent.type === "text_delta") {
      report({ type: "text", delta: event.assistantMessageEvent.delta });
    } else if (event.type === "tool_execution_start") {
      report({ type: "tool", name: event.toolName });
    }
  });
}
