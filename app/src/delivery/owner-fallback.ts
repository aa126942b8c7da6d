import type { Logger } from "@stavrobot/common";
import type { OwnerContact } from "../audience.js";
import type { Database } from "../db/database.js";
import type { InboxStore, UnseenAnswer } from "../db/inbox.js";
import type { Channel, Contact, Delivery, DeliveryPayload, StrandedDelivery } from "./store.js";
import { DeliveryStore } from "./store.js";
import { notificationTitle } from "./titles.js";
import type { DeliveryFollowUp } from "./worker.js";

/** A failure that is not the channel being down is left to the retries for this long first. */
const GRACE_MS = 60_000;

export interface OwnerFallbackDeps {
  db: Database;
  inbox: InboxStore;
  owner: OwnerContact;
  /** A channel as people read it ("Signal"), and a composed delivery's text as plain text. */
  channels: Record<Channel, { title: string; plainText(payload: DeliveryPayload): string }>;
  /** A notice was kept for the owner: the notifications list it, the open consoles hear of it. */
  onKept?: (answer: UnseenAnswer) => void;
  /** A kept message reached the owner on its channel after all: its notice is no longer theirs to see. */
  onDeliveredLater?: (keptInboxId: number) => Promise<void>;
  logger: Logger;
  graceMs?: number;
}

/**
 * A message for the owner that their channel cannot deliver (Signal's signal-cli missing, its
 * bridge down, a long outage) must still reach them: it is kept for their consoles as a notice
 * (the web's notifications, the next REPL, the next console reply), saying why, while the
 * deliveries keep trying the channel. Whichever reaches the owner first wins:
 * - a console shows the notice (or the owner dismisses it): the channel's delivery is withdrawn,
 *   so it does not arrive there too, hours later;
 * - the channel delivers it first: the notice is dismissed and marked seen, so no console shows
 *   it again.
 * Kept at once when the channel is down; after a minute of failed retries otherwise (a blip or
 * a short rate limit is the retries' to absorb). Messages queued behind a failing one (they are
 * not tried before it) are kept with it. Messages to other people are not kept (a given-up one is
 * still a notice to the owner, as before).
 */
export class OwnerFallback implements DeliveryFollowUp {
  private readonly store: DeliveryStore;

  constructor(private readonly deps: OwnerFallbackDeps) {
    this.store = new DeliveryStore(deps.db);
  }

  async beforeRound(): Promise<void> {
    const withdrawn = await this.store.withdrawShown();
    if (withdrawn.length > 0) {
      this.deps.logger.info("withdrawn: shown to the owner on their console instead", {
        ids: withdrawn.map((delivery) => delivery.id),
      });
    }
    await this.keepStranded();
  }

  async afterFailure(): Promise<void> {
    await this.keepStranded();
  }

  async afterSent(delivery: Delivery): Promise<void> {
    const kept = delivery.keptInboxId;
    if (kept === null || (await this.store.keptPending(kept))) return;
    this.deps.logger.info("a message kept for the owner's consoles reached them on its channel", {
      id: delivery.id,
      channel: delivery.channel,
      notice: kept,
    });
    await this.deps.onDeliveredLater?.(kept);
  }

  /** Keeps each stranded message to the owner as one notice (its parts together), in order. */
  private async keepStranded(): Promise<void> {
    const contacts: Contact[] = (Object.entries(this.deps.owner) as [Channel, string | undefined][])
      .filter((entry): entry is [Channel, string] => entry[1] !== undefined)
      .map(([channel, recipient]) => ({ channel, recipient }));
    const stranded = await this.store.stranded(contacts, this.deps.graceMs ?? GRACE_MS);
    for (const parts of byMessage(stranded)) {
      const first = parts[0] as StrandedDelivery;
      const { title, text } = this.notice(parts);
      // The notice and the mark together: a crash between them would keep it twice.
      const kept = await this.deps.db.transaction(async (tx) => {
        const notice = await this.deps.inbox.within(tx).addNotice("delivery", `(${title})`, text);
        await new DeliveryStore(tx).keptAs(
          parts.map((part) => part.id),
          notice.id,
        );
        return notice;
      });
      this.deps.logger.warn("kept for the owner's consoles: its channel could not deliver it", {
        ids: parts.map((part) => part.id),
        channel: first.channel,
        notice: kept.id,
        reason: first.reason,
      });
      this.deps.inbox.noteUnseen(kept.id);
      this.deps.onKept?.(kept);
    }
  }

  /** The notice: why the channel could not deliver it, what it said, and what happens next. */
  private notice(parts: StrandedDelivery[]): { title: string; text: string } {
    const first = parts[0] as StrandedDelivery;
    const channel = this.deps.channels[first.channel];
    const said = parts
      .map((part) =>
        [
          channel.plainText(part.payload),
          part.payload.attachmentName ? `[file: ${part.payload.attachmentName}]` : "",
        ]
          .filter((line) => line.trim())
          .join("\n"),
      )
      .filter((text) => text.trim())
      .join("\n\n");
    const title =
      (first.turn ? notificationTitle(first.turn) : "") ||
      said.split("\n")[0]?.slice(0, 200) ||
      `a ${channel.title} message`;
    const reason = first.reason.replace(/[.\s]+$/, "");
    return {
      title,
      text:
        `${channel.title} could not deliver this to you: ${reason}.\n\n${said}\n\n` +
        `_You have it here now, so it is not sent on ${channel.title} as well._`,
    };
  }
}

/** Deliveries grouped by the message they carry (its parts share a key but for the last `:<part>`). */
function byMessage(deliveries: StrandedDelivery[]): StrandedDelivery[][] {
  const groups = new Map<string, StrandedDelivery[]>();
  for (const delivery of deliveries) {
    const stem = `${delivery.channel}:${delivery.recipient}:${delivery.idempotencyKey.replace(/:\d+$/, "")}`;
    const group = groups.get(stem);
    if (group) group.push(delivery);
    else groups.set(stem, [delivery]);
  }
  return [...groups.values()];
}
