import { errorMessage, type Logger } from "@stavrobot/common";
import type { InboxStore, UnseenAnswer } from "../db/inbox.js";
import type { NotificationStore } from "../db/notifications.js";
import { ANSWER_EVENT, DISMISSED_EVENT, type LiveEvents } from "./events.js";

/**
 * What follows an answer kept for the owner (`AnswerDelivery`'s and the notices' `onKept`): it
 * is listed as a notification until the owner dismisses it, then the open consoles hear of it.
 * Listed first, so a page that reads the list when it hears of it finds it there. If the database
 * refuses the row, the consoles still hear of it (and the answer stays unseen in the inbox); the
 * failure is logged.
 */
export function keepForOwner(deps: {
  notifications: Pick<NotificationStore, "keep">;
  live: LiveEvents;
  logger: Logger;
}): (answer: UnseenAnswer) => Promise<void> {
  return async (answer) => {
    try {
      await deps.notifications.keep(answer.id, answer.title || answer.message.split("\n")[0] || "");
    } catch (error) {
      deps.logger.warn("could not list a notification for the owner", {
        id: answer.id,
        error: errorMessage(error),
      });
    }
    deps.live.publish(ANSWER_EVENT, answer);
  };
}

/**
 * What follows a kept notice that no longer needs the owner (its message reached them on its
 * channel after all): its notification is dismissed, it is marked seen (no console shows it
 * again), and every open page hears of the dismissal.
 */
export function withdrawFromOwner(deps: {
  notifications: Pick<NotificationStore, "dismiss">;
  inbox: Pick<InboxStore, "markSeen">;
  live: LiveEvents;
}): (inboxId: number) => Promise<void> {
  return async (inboxId) => {
    const dismissed = await deps.notifications.dismiss([inboxId]);
    await deps.inbox.markSeen([inboxId]);
    if (dismissed.length > 0) deps.live.publish(DISMISSED_EVENT, { ids: dismissed });
  };
}
