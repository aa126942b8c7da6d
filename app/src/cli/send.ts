/** The client's side of `POST /chat`: one message sent, its answer (or why there is none). */
import { basicAuthHeader } from "@stavrobot/common";
import type { Progress } from "./progress.js";
import { readEvents } from "./sse.js";
import { howChosen, type ServerUrl } from "./server-url.js";

export const EXIT = { ok: 0, serverError: 1, usage: 2, unreachable: 3 } as const;

export class ClientError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** Error codes of a connection that was never made: the request did not leave this machine. */
const NOT_CONNECTED = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** What a reply that was cut off means for the message, when the app said it was saved (or not). */
const SAVED_CUT =
  "Your message was saved: the assistant answers it, and the reply is shown with your next message.";
const MAYBE_CUT =
  "If the message reached the assistant it was saved, and its reply is shown with your next message.";

export async function sendMessage(
  server: ServerUrl,
  password: string,
  message: string,
  onProgress?: (progress: Progress) => void,
): Promise<string> {
  const base = server.url.replace(/\/+$/, "");
  let response: Response;
  try {
    response = await fetch(`${base}/chat`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Authorization: basicAuthHeader(password),
        // The turn's progress as it happens, when the app can stream it (plain JSON otherwise).
        ...(onProgress ? { Accept: "text/event-stream, application/json" } : {}),
      },
      body: JSON.stringify({ message, source: "cli" }),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    if (NOT_CONNECTED.has(cause)) {
      throw new ClientError(
        `Cannot reach ${server.url} (${cause}): nothing was sent. ${howChosen(server)}`,
        EXIT.unreachable,
      );
    }
    throw new ClientError(`The connection to ${server.url} broke (${cause}). ${MAYBE_CUT}`, EXIT.unreachable);
  }
  if (onProgress && response.ok && response.headers.get("content-type")?.startsWith("text/event-stream")) {
    return answerOf(await readTurnEvents(server, response, onProgress));
  }
  let text: string;
  try {
    text = await response.text();
  } catch {
    throw new ClientError(
      `The connection to ${server.url} broke before the answer. ${MAYBE_CUT}`,
      EXIT.unreachable,
    );
  }
  let body: { response?: unknown; error?: unknown; failed?: unknown } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // Not JSON: reported below.
  }
  if (response.status === 401)
    throw new ClientError("Wrong password (check STAVROBOT_PASSWORD).", EXIT.serverError);
  if (!response.ok) {
    const detail = typeof body.error === "string" ? body.error : text.slice(0, 300);
    throw new ClientError(`The server answered ${response.status}: ${detail}`, EXIT.serverError);
  }
  return answerOf(body);
}

/** The reply in a `/chat` answer; a failed turn is an error whose text says why. */
function answerOf(body: { response?: unknown; error?: unknown; failed?: unknown }): string {
  // An answer that could not come (the database went away; the message runs later): why, as is.
  if (typeof body.error === "string") throw new ClientError(body.error, EXIT.serverError);
  if (typeof body.response !== "string")
    throw new ClientError("The server sent an unexpected answer.", EXIT.serverError);
  // The turn failed (the provider, a tool round cap, …): its text says why.
  if (body.failed === true) throw new ClientError(body.response, EXIT.serverError);
  return body.response;
}

/**
 * Reads `/chat`'s events, passing progress on, up to its last event: the answer or an error. Its
 * first event (`accepted`) says the message is saved: a connection lost after it loses nothing.
 */
async function readTurnEvents(
  server: ServerUrl,
  response: Response,
  onProgress: (progress: Progress) => void,
): Promise<{ response?: unknown; error?: unknown; failed?: unknown }> {
  let accepted = false;
  try {
    for await (const { type, data } of response.body ? readEvents(response.body) : []) {
      const parsed = JSON.parse(data) as Record<string, unknown>;
      if (type === "accepted") accepted = true;
      if (type === "answer" || type === "error") return parsed;
      if (["tool", "retry", "text", "progress"].includes(type)) onProgress({ type, ...parsed } as Progress);
    }
  } catch {
    // The connection broke: said below.
  }
  throw new ClientError(
    `The connection to ${server.url} ended before the answer. ${accepted ? SAVED_CUT : MAYBE_CUT}`,
    EXIT.unreachable,
  );
}

export type Output = { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream };

/**
 * Prints what `send` brings (nothing for undefined) on stdout, or its error on stderr, and
 * returns the exit code it means.
 */
export async function printReply(
  out: Output,
  send: () => Promise<string | undefined>,
  print: (text: string, stream: NodeJS.WritableStream) => void = (text, stream) => void stream.write(text),
): Promise<number> {
  try {
    const reply = await send();
    if (reply !== undefined) print(reply + "\n", out.stdout);
    return EXIT.ok;
  } catch (error) {
    print(`${(error as Error).message}\n`, out.stderr);
    return error instanceof ClientError ? error.exitCode : EXIT.serverError;
  }
}
