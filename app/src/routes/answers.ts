import { readValidJson, type Router } from "@stavrobot/common";
import { z } from "zod";
import { CHANNEL_SOURCES } from "../audience.js";
import type { InboxStore } from "../db/inbox.js";
import type { NotificationStore } from "../db/notifications.js";
import { DISMISSED_EVENT, type LiveEvents } from "../live/events.js";

const idsSchema = z.strictObject({
  ids: z
    .array(
      z
        .number()
        .int()
        .positive()
        .max(2 ** 31 - 1),
    )
    .max(100),
});

export interface AnswerRouteDeps {
  inbox: InboxStore;
  notifications: NotificationStore;
  live: LiveEvents;
}

/**
 * Answers kept for the owner (turns nobody waited for, with no push channel to send them to):
 * - `GET /api/answers/pending` lists the ones no console has shown, `POST /api/answers/seen {ids}`
 *   marks them shown (the CLI shows them when it starts; any console reply shows them too);
 * - `GET /api/notifications` lists the ones the owner has not dismissed (newest first, at most
 *   50), each `{id, source, title, response, failed, at}`; `POST /api/notifications/dismiss {ids}`
 *   dismisses them (and marks them shown), answers `{dismissed}` (the ids dismissed now) and tells
 *   every open page (the `dismissed` event).
 */
export function addAnswerRoutes(router: Router, deps: AnswerRouteDeps): void {
  const { inbox, notifications, live } = deps;
  router
    .get("/api/answers/pending", async () => {
      const pending = await inbox.unseenAnswers({ owner: true }, 2 ** 31 - 1, CHANNEL_SOURCES);
      return { json: { answers: pending } };
    })
    .post("/api/answers/seen", async ({ req }) => {
      const { ids } = await readValidJson(req, 64 * 1024, idsSchema);
      await inbox.markSeen(ids);
      return { json: { ok: true } };
    })
    .get("/api/notifications", async () => ({ json: { notifications: await notifications.open() } }))
    .post("/api/notifications/dismiss", async ({ req }) => {
      const { ids } = await readValidJson(req, 64 * 1024, idsSchema);
      const dismissed = await notifications.dismiss(ids);
      if (dismissed.length > 0) {
        await inbox.markSeen(dismissed);
        live.publish(DISMISSED_EVENT, { ids: dismissed });
      }
      return { json: { dismissed } };
    });
}
