import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { errorMessage } from "@stavrobot/common";
import type { Delivery } from "../delivery/store.js";
import type { SendResult } from "../delivery/worker.js";

/** What the Signal and WhatsApp bridges take at `POST /send`: one recipient, text and/or one file. */
export interface BridgeSendBody {
  recipient: string;
  /** Markdown: the bridge turns it into its network's formatting. */
  message?: string;
  /** The file's bytes as base64. */
  attachment?: string;
  attachmentFilename?: string;
}

/** One delivery as a bridge's `POST /send` body: its text when it has some, its file read whole. */
export async function bridgeSendBody(delivery: Delivery): Promise<BridgeSendBody> {
  const { recipient, payload } = delivery;
  const body: BridgeSendBody = { recipient };
  if (payload.text?.trim()) body.message = payload.text;
  if (payload.attachmentPath) {
    body.attachment = (await readFile(payload.attachmentPath)).toString("base64");
    body.attachmentFilename = payload.attachmentName ?? basename(payload.attachmentPath);
  }
  return body;
}

/** A bridge that did not answer at all: the message waits, and the owner is told where to look. */
export function bridgeUnreachable(bridge: string, error: unknown): SendResult {
  return {
    ok: false,
    retry: true,
    channelDown: true,
    error: `the ${bridge} bridge does not answer (${errorMessage(error)}); npm start (or compose) restarts it, and its log says why it stopped`,
  };
}
