import { createHmac, timingSafeEqual } from "node:crypto";
import type { Queryable } from "../db/database.js";

/** A call waiting for (or decided by) the owner. */
export interface Approval {
  id: number;
  agentId: number;
  inboxId: number | null;
  tool: string;
  args: Record<string, unknown>;
  askedBy: string;
  /** Where the agent's answer about it goes (the person whose turn asked), when not the owner. */
  replyTo: { channel: string; recipient: string } | null;
  status: "pending" | "approved" | "denied" | "done";
  result: string | null;
  createdAt: Date;
}

interface Row {
  id: number;
  agent_id: number;
  inbox_id: number | null;
  tool: string;
  args: Record<string, unknown>;
  asked_by: string;
  reply_to: { channel: string; recipient: string } | null;
  signature: string;
  status: Approval["status"];
  result: string | null;
  created_at: Date;
}

/** Keys in a fixed order, so the same call signs the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * The calls the gate stopped. Each row is signed with a key the model never sees: a row it inserts
 * or changes with SQL (another tool, other arguments) fails the check and runs nothing.
 */
export class ApprovalStore {
  private readonly key: Buffer;

  constructor(
    private readonly db: Queryable,
    secret: string,
  ) {
    this.key = createHmac("sha256", secret).update("stavrobot approvals v1").digest();
  }

  async add(call: {
    agentId: number;
    inboxId: number | null;
    tool: string;
    args: Record<string, unknown>;
    askedBy: string;
    replyTo: { channel: string; recipient: string } | null;
  }): Promise<number> {
    const result = await this.db.query<{ id: number }>(
      `INSERT INTO approvals (agent_id, inbox_id, tool, args, asked_by, reply_to, signature)
       VALUES ($1, $2, $3, $4, $5, $6, '') RETURNING id`,
      [
        call.agentId,
        call.inboxId,
        call.tool,
        JSON.stringify(call.args),
        call.askedBy,
        call.replyTo ? JSON.stringify(call.replyTo) : null,
      ],
    );
    const id = result.rows[0]!.id;
    await this.db.query("UPDATE approvals SET signature = $2 WHERE id = $1", [
      id,
      this.sign(id, call.agentId, call.tool, call.args),
    ]);
    return id;
  }

  async pending(): Promise<Approval[]> {
    const result = await this.db.query<Row>("SELECT * FROM approvals WHERE status = 'pending' ORDER BY id");
    return result.rows.filter((row) => this.verify(row)).map(toApproval);
  }

  async get(id: number): Promise<Approval | undefined> {
    const result = await this.db.query<Row>("SELECT * FROM approvals WHERE id = $1", [id]);
    const row = result.rows[0];
    return row && this.verify(row) ? toApproval(row) : undefined;
  }

  /**
   * The owner's decision on a pending call: approved or denied, once. Undefined when no pending,
   * validly signed call has that id.
   */
  async decide(id: number, decision: "approved" | "denied"): Promise<Approval | undefined> {
    const result = await this.db.query<Row>(
      "UPDATE approvals SET status = $2, decided_at = now() WHERE id = $1 AND status = 'pending' RETURNING *",
      [id, decision],
    );
    const row = result.rows[0];
    if (!row) return undefined;
    if (!this.verify(row)) {
      await this.db.query(
        "UPDATE approvals SET status = 'denied', result = 'its signature did not match' WHERE id = $1",
        [id],
      );
      return undefined;
    }
    return toApproval(row);
  }

  /** Takes an approved call to run it: true once, for one caller (a repeated turn does not run it again). */
  async claim(id: number): Promise<Approval | undefined> {
    const result = await this.db.query<Row>(
      "UPDATE approvals SET status = 'done' WHERE id = $1 AND status = 'approved' RETURNING *",
      [id],
    );
    const row = result.rows[0];
    return row && this.verify(row) ? toApproval(row) : undefined;
  }

  async recordResult(id: number, result: string): Promise<void> {
    await this.db.query("UPDATE approvals SET result = $2 WHERE id = $1", [id, result.slice(0, 4000)]);
  }

  private sign(id: number, agentId: number, tool: string, args: unknown): string {
    return createHmac("sha256", this.key)
      .update(`${id}\n${agentId}\n${tool}\n${canonical(args)}`)
      .digest("hex");
  }

  private verify(row: Row): boolean {
    const expected = Buffer.from(this.sign(row.id, row.agent_id, row.tool, row.args), "hex");
    const given = Buffer.from(row.signature ?? "", "hex");
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

function toApproval(row: Row): Approval {
  return {
    id: row.id,
    agentId: row.agent_id,
    inboxId: row.inbox_id,
    tool: row.tool,
    args: row.args,
    askedBy: row.asked_by,
    replyTo: row.reply_to,
    status: row.status,
    result: row.result,
    createdAt: new Date(row.created_at),
  };
}
