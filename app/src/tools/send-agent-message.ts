import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import type { Queryable } from "../db/database.js";
import { getAgent } from "../db/people.js";
import { ToolError, textResult } from "./result.js";

const parameters = Type.Object({
  agent_id: Type.Number({ description: "The ID of the target agent." }),
  message: Type.String({ description: "The message text to send." }),
});

export interface SendAgentMessageDeps {
  db: Queryable;
  /** The agent whose turn runs (the sender). */
  currentAgentId: () => number;
  /**
   * Saves the message in the inbox for the target agent (source "agent", the sender recorded),
   * resolving once it is saved; its turn runs later, in queue order.
   */
  enqueue: (message: { from: number; fromLabel: string; to: number; text: string }) => Promise<void>;
}

/** The reference's `send_agent_message`: one agent writes to another through the queue. */
export function createSendAgentMessageTool(deps: SendAgentMessageDeps): AgentTool<typeof parameters> {
  return {
    name: "send_agent_message",
    label: "Send agent message",
    description: "Send a message to another agent. The message is enqueued and processed asynchronously.",
    parameters,
    async execute(_id, params) {
      const from = deps.currentAgentId();
      if (!params.message.trim()) throw new ToolError("Error: message cannot be empty.");
      if (params.agent_id === from)
        throw new ToolError(`Error: agent ${from} is you; send it to another agent.`);
      const target = await getAgent(deps.db, params.agent_id);
      if (!target) throw new ToolError(`Error: agent ${params.agent_id} not found.`);
      const sender = await getAgent(deps.db, from);
      await deps.enqueue({
        from,
        fromLabel: `${sender?.name ?? "agent"} (ID: ${from})`,
        to: target.id,
        text: params.message,
      });
      return textResult(`Message sent to agent ${target.id}.`);
    },
  };
}
