import type { AnyAgentTool } from "../tools/result.js";
import type { InboxPayload } from "../db/inbox.js";
import type { ApprovalStore, Approval } from "./approvals.js";

/** What the owner says on a channel or console to decide: "/approve 12", "/deny 12". */
const COMMAND = /^\/(approve|deny)\s+#?(\d{1,9})\s*$/i;

export interface ApprovalDeciderDeps {
  store: ApprovalStore;
  /** Queues a turn of the agent that asked (the queue's `submit`). */
  submit: (source: string, payload: InboxPayload, key: string) => Promise<unknown>;
}

/**
 * The owner's decision on a call the gate stopped. Approved: a turn of the agent that asked runs
 * exactly that call, once, before its model is asked (`runApproved`), and the model is told the
 * outcome; denied: that agent is told it was not run. Only the owner reaches this: their password
 * (the web admin, `POST /api/approvals/:id`) or their own identity on a channel or console.
 */
export class ApprovalDecider {
  constructor(private readonly deps: ApprovalDeciderDeps) {}

  pending(): Promise<Approval[]> {
    return this.deps.store.pending();
  }

  /** The owner's "/approve N" or "/deny N": the answer to send back, or undefined when it is not one. */
  async command(text: string | undefined): Promise<string | undefined> {
    const match = COMMAND.exec(text?.trim() ?? "");
    if (!match) return undefined;
    return (
      await this.decide(Number(match[2]), match[1]!.toLowerCase() === "approve" ? "approved" : "denied")
    ).message;
  }

  async decide(id: number, decision: "approved" | "denied"): Promise<{ ok: boolean; message: string }> {
    const approval = await this.deps.store.decide(id, decision);
    if (!approval)
      return {
        ok: false,
        message: `No request ${id} waits for a decision (it was decided already, or never made).`,
      };
    const call = `${approval.tool} ${JSON.stringify(approval.args)}`.slice(0, 300);
    await this.deps.submit(
      "approval",
      {
        message:
          decision === "approved"
            ? `[The owner approved request ${id}: ${call}]`
            : `[The owner denied request ${id}: ${call} was not run. Do not try it again unless the owner asks.]`,
        attachments: [],
        agentId: approval.agentId,
        approval: decision === "approved" ? id : undefined,
        ...(approval.replyTo ? { replyTo: approval.replyTo } : {}),
        title: `${decision === "approved" ? "Approved" : "Denied"}: ${approval.tool}`,
      },
      `approval:${id}:${decision}`,
    );
    return {
      ok: true,
      message:
        decision === "approved"
          ? `Approved: request ${id} (${approval.tool}) runs now, once.`
          : `Denied: request ${id} (${approval.tool}) will not run.`,
    };
  }

  /**
   * Runs an approved call in its agent's turn (the queue's current one), once whatever happens to
   * the turn afterwards: the text the model then reads.
   */
  async runApproved(id: number, tools: readonly AnyAgentTool[]): Promise<string> {
    const approval = await this.deps.store.claim(id);
    if (!approval) return `[Request ${id} had already run, or its record was changed; nothing was run now.]`;
    const tool = tools.find((candidate) => candidate.name === approval.tool);
    if (!tool) {
      const said = `[The owner approved request ${id}, but ${approval.tool} is not one of this agent's tools now; nothing was run.]`;
      await this.deps.store.recordResult(id, said);
      return said;
    }
    let outcome: string;
    try {
      const result = await tool.execute(`approved-${id}`, approval.args as never);
      const text = result.content
        .map((block) => (block.type === "text" ? block.text : `[${block.type}]`))
        .join("\n");
      outcome = `[The owner approved request ${id}; ${approval.tool} ran once. Its result:]\n${text}`;
    } catch (error) {
      outcome = `[The owner approved request ${id}; ${approval.tool} ran once and failed: ${error instanceof Error ? error.message : String(error)}]`;
    }
    await this.deps.store.recordResult(id, outcome);
    return outcome;
  }
}
