import { HttpError, readValidJson, type Router } from "@stavrobot/common";
import { z } from "zod";
import type { EmailStore } from "./store.js";

const decisionSchema = z.strictObject({ action: z.enum(["once", "always", "dismiss"]) });

export interface EmailSettingsDeps {
  store: EmailStore;
  /** Gives a waiting mail to the queue as its sender's. */
  letThrough: (raw: Buffer) => Promise<"accepted" | "dropped">;
}

/**
 * The owner's waiting list (behind the password): mail from an allowed address whose sender was
 * not proven. `once` lets that mail through; `always` also lets that address through without
 * proof from now on (a signed entry; never for the owner's own address, which a mail proves or
 * waits); `dismiss` drops it.
 */
export function addEmailSettingsRoutes(router: Router, deps: EmailSettingsDeps): void {
  router
    .get("/api/settings/email/waiting", async () => ({
      json: {
        waiting: (await deps.store.waiting()).map((mail) => ({
          id: mail.id,
          sender: mail.sender,
          subject: mail.subject,
          reason: mail.reason,
          receivedAt: mail.receivedAt.toISOString(),
        })),
      },
    }))
    .post("/api/settings/email/waiting/:id", async ({ req, params }) => {
      const id = Number(params.id);
      if (!Number.isSafeInteger(id) || id <= 0) throw new HttpError(400, "Invalid request: id: not a number");
      const { action } = await readValidJson(req, 1024, decisionSchema);
      const settled = await deps.store.settleWaiting(id, action === "dismiss" ? "dismissed" : "let-through");
      if (!settled) throw new HttpError(404, `No mail ${id} waits (it was let through or dismissed already)`);
      if (action === "always") await deps.store.allowUnproven(settled.sender);
      const taken = action === "dismiss" ? "dismissed" : await deps.letThrough(settled.raw);
      return { json: { ok: true, result: taken } };
    });
}
