import { HttpError, readValidJson, type Router } from "@stavrobot/common";
import { z } from "zod";
import type { ApprovalDecider } from "../trust/decisions.js";

const decisionSchema = z.strictObject({ decision: z.enum(["approve", "deny"]) });

/**
 * `GET /api/approvals` and `POST /api/approvals/:id {decision: "approve"|"deny"}` (owner's
 * password): the calls the trust gate stopped, and the owner's decision on one.
 */
export function addApprovalRoutes(router: Router, approvals: ApprovalDecider): void {
  router
    .get("/api/approvals", async () => ({
      json: {
        pending: (await approvals.pending()).map((approval) => ({
          id: approval.id,
          tool: approval.tool,
          args: approval.args,
          askedBy: approval.askedBy,
          createdAt: approval.createdAt.toISOString(),
        })),
      },
    }))
    .post("/api/approvals/:id", async ({ req, params }) => {
      const id = Number(params.id);
      if (!Number.isSafeInteger(id) || id <= 0) throw new HttpError(400, "Invalid request: id: not a number");
      const { decision } = await readValidJson(req, 1024, decisionSchema);
      const decided = await approvals.decide(id, decision === "approve" ? "approved" : "denied");
      if (!decided.ok) throw new HttpError(404, decided.message);
      return { json: decided };
    });
}
