import { readValidJson, type Router } from "@stavrobot/common";
import { z } from "zod";
import { CHANNEL_SOURCES } from "../audience.js";
import type { InboxStore } from "../db/inbox.js";

const seenSchema = z.strictObject({ ids: z.array(z.number().int().positive()).max(100) });

/**
 * Answers kept for the owner (turns nobody waited for, with no push channel to send them to):
 * `GET /api/answers/pending` lists them, `POST /api/answers/seen {ids}` marks them shown. The CLI
 * shows them when it starts; any console reply shows them too.
 */
export function addAnswerRoutes(router: Router, inbox: InboxStore): void {
  router
    .get("/api/answers/pending", async () => {
      const pending = await inbox.unseenAnswers({ owner: true }, 2 ** 31 - 1, CHANNEL_SOURCES);
      return { json: { answers: pending } };
    })
    .post("/api/answers/seen", async ({ req }) => {
      const { ids } = await readValidJson(req, 64 * 1024, seenSchema);
      await inbox.markSeen(ids);
      return { json: { ok: true } };
    });
}
