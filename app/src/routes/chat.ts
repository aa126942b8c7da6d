import { realpath } from "node:fs/promises";
import { sep } from "node:path";
import {
  CHAT_BODY_LIMIT_BYTES,
  CHAT_FILE_LIMIT_BYTES,
  HttpError,
  badRequest,
  chatRequestSchema,
  decodeBase64,
  readValidJson,
  toSafeFilename,
  type Attachment,
  type ChatRequest,
  type Handler,
  type Logger,
} from "@stavrobot/common";
import { isDatabaseUnavailable } from "../db/database.js";
import { retryLater } from "./outage.js";
import type { Allowlist } from "../allowlist/allowlist.js";
import type { FileAreas } from "../files/areas.js";
import type { InboxStore, UnseenAnswer } from "../db/inbox.js";
import { CHANNEL_SOURCES, isOwnerConsole, shownSource } from "../audience.js";
import { describePluginRun } from "../plugins/result.js";
import { NotReadyError, takeMessage, type IntakeDeps, type Taken } from "../queue/intake.js";
import type { MessageQueue } from "../queue/queue.js";
import { ANSWER_EVENT, type LiveEvents } from "../live/events.js";
import { removeFiles, storeFiles, type DecodedFile } from "../files/uploads.js";
import type { TurnProgress } from "../live/progress.js";
import { openTurnEvents, wantsEvents } from "./chat-events.js";

export const NOT_SAVED_REPLY =
  "The database is unavailable right now, so your message was not saved. Please try again in a moment.";
export const SAVED_WILL_RUN_REPLY =
  "The database is unavailable right now. Your message was saved and will be answered when it is back.";

export interface ChatDeps extends IntakeDeps {
  queue: MessageQueue;
  inbox: InboxStore;
  /**
   * The owner's file areas: a message's files are kept in the uploads of the agent it goes to, a
   * plugin's returned files in that agent's `plugin_output/<plugin>/` (`FileAreas.of`).
   */
  areas: FileAreas;
  allowlist: Allowlist;
  logger: Logger;
  /** A message explaining what configuration is missing, or undefined when the app is ready. */
  notReady: () => string | undefined;
  /** The owner's live events: answers they carried are not repeated at the head of a reply. */
  live: LiveEvents;
  /** What a turn is doing, for a sender that follows it (`Accept: text/event-stream`). */
  progress: TurnProgress;
}

/**
 * `POST /chat`: validate everything, store inline files, save the message, wait for the reply.
 * Nothing is written until the whole request has been checked. A database outage before the
 * message is saved (the allowlist, the insert) answers 503 with `Retry-After`: nothing is kept.
 * Once saved, the message runs whatever happens; an outage then answers 503 `saved: true`
 * without `Retry-After`, since sending it again would run it twice.
 */
export function createChatHandler(deps: ChatDeps): Handler {
  const handle = chatHandler(deps);
  return async (ctx) => {
    try {
      return await handle(ctx);
    } catch (error) {
      if (isDatabaseUnavailable(error)) throw retryLater(NOT_SAVED_REPLY);
      throw error;
    }
  };
}

function chatHandler(deps: ChatDeps): Handler {
  return async ({ req, res }) => {
    const body = await readValidJson(req, CHAT_BODY_LIMIT_BYTES, chatRequestSchema);
    // A message sent without a source is the owner's at a terminal: one name for it everywhere.
    const source = body.source ?? "cli";
    const sender = body.sender ?? null;
    if (body.turn !== undefined && !source.startsWith("plugin:")) {
      throw badRequest(
        "Invalid request: turn: only a plugin's message (source plugin:<name>/<tool>) names the turn that started its run",
      );
    }
    // Answers kept from here on, while the message waits, may reach an open console at once.
    const sinceSubmit = deps.live.latest;
    let taken: Taken;
    try {
      taken = await takeMessage(deps, {
        source,
        sender,
        isStop: isStop(body),
        idempotencyKey: body.idempotencyKey,
        stopKey: `stop:${source}:${body.idempotencyKey ?? Date.now()}`,
        text: body.message,
        turn: body.turn,
        payload: async (agentId) => {
          // Its files are the agent's it goes to: a contact's land in their agent's uploads.
          const areas = deps.areas.of(agentId);
          const attachments = await checkAttachments(body.attachments ?? [], areas.uploads);
          const written = await storeFiles(decodeInlineFiles(body), areas.uploads);
          // A plugin's result becomes the model's text as a synchronous run's does; the images it
          // returned are attached too, for the model to see.
          const run =
            body.pluginResult && (await describePluginRun({ ...body.pluginResult, filesDir: areas.root }));
          const message = [body.message, run?.text].filter((part) => part?.trim()).join("\n\n") || undefined;
          const images = run?.files.filter((file) => file.mimeType.startsWith("image/")) ?? [];
          // How the owner's notification names it (its kind says which plugin).
          const title =
            body.pluginResult && `${body.pluginResult.tool ?? "Set-up"} ${run?.ok ? "finished" : "failed"}`;
          return {
            payload: { message, attachments: [...attachments, ...written, ...images], title },
            discard: () => removeFiles(written),
          };
        },
      });
    } catch (error) {
      if (error instanceof NotReadyError) throw new HttpError(503, error.message);
      throw error;
    }
    if (taken.kind === "dropped") return { json: { response: "" } };
    if (taken.kind === "stopped") return { json: { response: taken.response } };
    const { submitted } = taken;
    // Services (a plugin's result, the coder) need to know the message is safe, not its answer:
    // that goes to the person the turn is for.
    if (/\brespond-async\b/i.test(String(req.headers.prefer ?? ""))) {
      return { status: 202, json: { accepted: true, duplicate: submitted.duplicate } };
    }
    // A client that asks for events follows the turn as it happens, and gets the same answer last.
    const events = wantsEvents(req.headers.accept)
      ? openTurnEvents(res, deps.progress, submitted.id)
      : undefined;
    const reply = await Promise.race([submitted.reply, submitted.deferred.then(() => undefined)]).finally(
      () => events?.unfollow(),
    );
    // Saved, and it will run: the sender learns it now, and sees the reply with a later one.
    if (reply === undefined) {
      if (events) return events.end("error", { error: SAVED_WILL_RUN_REPLY, saved: true });
      throw new HttpError(503, SAVED_WILL_RUN_REPLY, { saved: true });
    }
    const audience = isOwnerConsole(source) ? { owner: true as const } : { source: source as string };
    // An answer an open console was sent while this message waited is that console's to show and
    // mark seen; the reply does not repeat it (if nothing shows it, a later reply or console will).
    const streamed = new Set(
      deps.live
        .between(sinceSubmit, deps.live.latest)
        .filter((published) => published.heard && published.event.type === ANSWER_EVENT)
        .map((published) => (published.event.data as UnseenAnswer).id),
    );
    const missed = (
      await deps.inbox.unseenAnswers(audience, submitted.id, CHANNEL_SOURCES).catch(() => [])
    ).filter((answer) => !streamed.has(answer.id));
    // A steering acknowledgement is not the message's reply: that one is settled after the turn.
    const seen = [...(submitted.steered ? [] : [submitted.id]), ...missed.map((m) => m.id)];
    res.once("finish", () => deps.inbox.noteSeen(seen));
    // A turn that failed says so beside its text (the reference's clients read `response` only).
    const failed = submitted.ending() === "error" ? { failed: true } : {};
    const answer = { response: withMissedReplies(reply, missed), ...failed };
    return events ? events.end("answer", answer) : { json: answer };
  };
}

function isStop(body: ChatRequest): boolean {
  return (
    body.message?.trim().toLowerCase() === "/stop" &&
    !body.audio &&
    !body.files?.length &&
    !body.attachments?.length
  );
}

/**
 * Attachments must already live in the uploads directory of the agent the message goes to (no
 * reading arbitrary files, nor the owner's files for a contact's agent).
 */
async function checkAttachments(attachments: Attachment[], uploadsDir: string): Promise<Attachment[]> {
  // Most messages have none: no file system call (each is a hop through libuv's thread pool).
  if (attachments.length === 0) return [];
  // An agent's uploads that were never made hold nothing to refer to.
  const root = await realpath(uploadsDir).catch(() => undefined);
  const checked: Attachment[] = [];
  for (const attachment of attachments) {
    let resolved: string;
    try {
      resolved = await realpath(attachment.storedPath);
    } catch {
      throw badRequest(`Attachment not found: ${attachment.originalFilename}`);
    }
    if (root === undefined || !resolved.startsWith(root + sep)) {
      throw badRequest(`Attachment ${attachment.originalFilename} is not in the uploads directory`);
    }
    checked.push({ ...attachment, storedPath: resolved });
  }
  return checked;
}

function decodeInlineFiles(body: ChatRequest): DecodedFile[] {
  const files: DecodedFile[] = (body.files ?? []).map((file, index) => ({
    data: decodeField(file.data, `files.${index}.data`),
    filename: toSafeFilename(file.filename),
    mimeType: file.mimeType,
  }));
  if (body.audio !== undefined) {
    const mimeType = body.audioContentType ?? "audio/ogg";
    files.push({
      data: decodeField(body.audio, "audio"),
      filename: `voice-note${extensionFor(mimeType)}`,
      mimeType,
    });
  }
  for (const file of files) {
    if (file.data.length > CHAT_FILE_LIMIT_BYTES) {
      throw new HttpError(413, `File ${file.filename} is larger than 10 MB`);
    }
  }
  return files;
}

function decodeField(data: string, field: string): Buffer {
  const decoded = decodeBase64(data);
  if (!decoded || decoded.length === 0) throw badRequest(`Invalid request: ${field}: not valid base64`);
  return decoded;
}

function extensionFor(mimeType: string): string {
  const subtype =
    mimeType
      .split("/")[1]
      ?.split(";")[0]
      ?.replace(/[^a-z0-9]/gi, "") ?? "";
  return subtype ? `.${subtype.slice(0, 10)}` : ".bin";
}

function withMissedReplies(reply: string, missed: UnseenAnswer[]): string {
  if (missed.length === 0) return reply;
  return `${formatPendingAnswers(missed)}\n\n---\n\n${reply}`;
}

/**
 * Answers the owner has not seen, each under its title in the owner's words (else the first line of
 * what it answers) and where that came from.
 */
export function formatPendingAnswers(answers: UnseenAnswer[]): string {
  const earlier = answers.map((answer) => {
    const first = answer.title || answer.message.split("\n")[0]?.slice(0, 200) || "(attachment)";
    const from = answer.source && !isOwnerConsole(answer.source) ? ` (${shownSource(answer.source)})` : "";
    return `> ${first}${from}\n${answer.response}`;
  });
  return `Replies to earlier messages that did not reach you:\n\n${earlier.join("\n\n")}`;
}
