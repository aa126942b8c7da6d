import { createHash } from "node:crypto";
import { rm } from "node:fs/promises";
import { z } from "zod";
import type { ChatRequest, Logger, Outbox } from "@stavrobot/common";
import { E164_PATTERN } from "@stavrobot/common";
import { collectAttachments } from "./attachments.js";
import { signalToMarkdown } from "./format.js";

/**
 * What the bridge reads of a `receive` event (signal-cli's JsonMessageEnvelope and
 * JsonDataMessage); everything else is ignored, and a field of an unexpected type drops the event.
 */
const payloadSchema = z.object({
  envelope: z.object({
    sourceNumber: z.string().nullish(),
    sourceUuid: z.string().nullish(),
    sourceDevice: z.number().nullish(),
    timestamp: z.number(),
    dataMessage: z
      .object({
        message: z.string().nullish(),
        textStyles: z.array(z.object({ start: z.number(), length: z.number(), style: z.string() })).nullish(),
        attachments: z
          .array(
            z.object({
              id: z.string().nullish(),
              contentType: z.string().nullish(),
              filename: z.string().nullish(),
            }),
          )
          .nullish(),
        groupInfo: z.unknown().optional(),
      })
      .nullish(),
  }),
});

export type InboundResult =
  | { kind: "skipped"; reason: string }
  | { kind: "message"; id: string; message: ChatRequest; attachmentPaths: string[] };

/**
 * Turns one `receive` event into a chat message for the app, or says why there is none. Only
 * direct messages with content count: receipts, typing indicators, sync messages (what this account
 * sent from another device), reactions, stickers without text and group messages are skipped (the
 * assistant answers a person, never a group whose members nobody vetted). Every sender is
 * forwarded: the app decides who may talk to the assistant.
 */
export async function toChatMessage(data: string, attachmentsDir: string): Promise<InboundResult> {
  let raw: unknown;
  try {
    raw = JSON.parse(data);
  } catch {
    return { kind: "skipped", reason: "not JSON" };
  }
  const parsed = payloadSchema.safeParse(raw);
  if (!parsed.success) return { kind: "skipped", reason: "not a message envelope" };
  const envelope = parsed.data.envelope;
  const dataMessage = envelope.dataMessage;
  if (!dataMessage) return { kind: "skipped", reason: "no data message (receipt, typing or sync)" };
  if (dataMessage.groupInfo != null) return { kind: "skipped", reason: "group message" };
  const sender = envelope.sourceNumber ?? "";
  if (!E164_PATTERN.test(sender)) return { kind: "skipped", reason: "the sender's number is not known" };

  const text = dataMessage.message ? signalToMarkdown(dataMessage.message, dataMessage.textStyles ?? []) : "";
  const collected = await collectAttachments(dataMessage.attachments ?? [], attachmentsDir);
  const message = [text, ...collected.notes].filter((part) => part.trim() !== "").join("\n\n");
  if (message === "" && collected.files.length === 0) return { kind: "skipped", reason: "no content" };
  return {
    kind: "message",
    id: entryId(envelope.timestamp, envelope.sourceUuid ?? sender, envelope.sourceDevice ?? 0),
    message: {
      source: "signal",
      sender,
      ...(message !== "" ? { message } : {}),
      ...(collected.files.length > 0 ? { files: collected.files } : {}),
    },
    attachmentPaths: collected.paths,
  };
}

/**
 * Names the outbox entry after the message itself (its Signal timestamp, sender and device), so
 * the same message seen twice (an event replayed after a reconnection) is the same entry and
 * carries the same idempotency key: the app runs it once. Starts with the zero-padded timestamp so
 * entries sort by time like the outbox's own names.
 */
function entryId(timestamp: number, sender: string, device: number): string {
  const who = createHash("sha256").update(sender).digest("hex").slice(0, 16);
  return `${String(timestamp).padStart(15, "0")}-signal-${who}-${device}`;
}

/**
 * Queues each message of a `receive` event for durable delivery to the app, then deletes
 * signal-cli's copies of the attachments it carries (the outbox holds them now).
 */
export function createInboundHandler(deps: {
  outbox: Pick<Outbox, "enqueue">;
  attachmentsDir: string;
  logger: Logger;
}): (data: string) => Promise<void> {
  return async (data) => {
    const result = await toChatMessage(data, deps.attachmentsDir);
    if (result.kind === "skipped") {
      deps.logger.debug("ignored a Signal event", { reason: result.reason });
      return;
    }
    await deps.outbox.enqueue(result.message, { id: result.id });
    deps.logger.info("received a Signal message", {
      from: result.message.sender,
      files: result.message.files?.length ?? 0,
    });
    for (const path of result.attachmentPaths) await rm(path, { force: true }).catch(() => undefined);
  };
}
