import { createServer, type ServerResponse } from "node:http";
import type { ChatRequest } from "../contracts/chat.js";
import { checkBasicPassword } from "../http/auth.js";
import { closeServer, listen } from "../http/serve.js";

/** An answer with its body: `json` is sent as JSON, `text` as it is (e.g. a proxy's HTML page). */
export interface FakeAppReply {
  status: number;
  json?: unknown;
  text?: string;
}

/** An answer kept for the owner, as the app's `GET /api/answers/pending` lists it. */
export interface PendingAnswer {
  id: number;
  message: string;
  source: string | null;
  response: string;
}

export interface FakeAppOptions {
  /** Default 0 (any free port); a fixed one brings "the app" up where a service already points. */
  port?: number;
  /** Statuses to answer with, in turn, before the default answer; tests may refill or empty it. */
  statuses?: number[];
  /**
   * Picks the answer to a request (`attempt`: how many requests so far carried its idempotency
   * key, this one included): a status (with the default body for it) or a whole reply; undefined
   * falls back to `statuses`, then to the default.
   */
  answer?: (body: ChatRequest, attempt: number) => number | FakeAppReply | undefined;
  /**
   * The owner's password, for clients of the app's public port (the CLI): a request without it
   * in Basic auth is recorded, then answered 401. Unset, nothing is checked.
   */
  password?: string;
  /** Served by `GET /api/answers/pending` until `POST /api/answers/seen` marks them. */
  pendingAnswers?: PendingAnswer[];
}

export interface FakeApp {
  url: string;
  port: number;
  /** Every `POST /chat` body received, including those answered with an error. */
  messages: ChatRequest[];
  /** The `Authorization` header of each request, in order. */
  authorizations: (string | undefined)[];
  /** The `Prefer` header of each request, in order. */
  prefer: (string | undefined)[];
  /** The `Content-Type` header of each request, in order. */
  contentTypes: (string | undefined)[];
  /** The status answered to each request, in order. */
  answered: number[];
  /** Statuses still to answer with, in turn (see `FakeAppOptions.statuses`). */
  statuses: number[];
  /** Answers not yet marked seen (see `FakeAppOptions.pendingAnswers`). */
  pendingAnswers: PendingAnswer[];
  /** Every `POST /questions` body (an MCP server's question for the owner), answered 204. */
  questions: unknown[];
  close(): Promise<void>;
}

function reply(res: ServerResponse, { status, json, text }: FakeAppReply): void {
  res.writeHead(status, { "Content-Type": "application/json" }).end(text ?? JSON.stringify(json));
}

/**
 * A stand-in for the app's `POST /chat`, recording what the services (or the CLI) deliver. By
 * default it answers as the app does: 202 `{"accepted": true}` to `Prefer: respond-async` (a
 * message kept for its turn), 200 `{"response": "ok"}` otherwise. It also answers the CLI's
 * `GET /api/answers/pending` and `POST /api/answers/seen`, and records the runner's questions
 * for the owner (`POST /questions`).
 */
export async function startFakeApp(options: FakeAppOptions = {}): Promise<FakeApp> {
  const app: Omit<FakeApp, "url" | "port" | "close"> = {
    messages: [],
    authorizations: [],
    prefer: [],
    contentTypes: [],
    answered: [],
    statuses: options.statuses ?? [],
    pendingAnswers: options.pendingAnswers ?? [],
    questions: [],
  };
  const allowed = (authorization: string | undefined) =>
    options.password === undefined || checkBasicPassword(authorization, options.password);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const route = `${req.method} ${req.url}`;
      if (route === "GET /api/answers/pending" || route === "POST /api/answers/seen") {
        if (!allowed(req.headers.authorization))
          return reply(res, { status: 401, json: { error: "Unauthorized" } });
        if (route === "GET /api/answers/pending")
          return reply(res, { status: 200, json: { answers: app.pendingAnswers } });
        const { ids } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { ids: number[] };
        app.pendingAnswers = app.pendingAnswers.filter((answer) => !ids.includes(answer.id));
        return reply(res, { status: 200, json: { ok: true } });
      }
      if (route === "POST /questions") {
        app.questions.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
        res.writeHead(204).end();
        return;
      }
      if (route !== "POST /chat") {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
      app.messages.push(body);
      app.authorizations.push(req.headers.authorization);
      app.contentTypes.push(req.headers["content-type"]);
      const prefer = [req.headers.prefer ?? []].flat().join(", ") || undefined;
      app.prefer.push(prefer);
      const attempt = app.messages.filter((m) => m.idempotencyKey === body.idempotencyKey).length;
      const async = prefer === "respond-async";
      const chosen = allowed(req.headers.authorization)
        ? (options.answer?.(body, attempt) ?? app.statuses.shift() ?? (async ? 202 : 200))
        : { status: 401, json: { error: "Unauthorized" } };
      const answer: FakeAppReply =
        typeof chosen !== "number"
          ? chosen
          : {
              status: chosen,
              json:
                chosen >= 300 ? { error: "Unavailable" } : async ? { accepted: true } : { response: "ok" },
            };
      app.answered.push(answer.status);
      reply(res, answer);
    });
  });
  const port = await listen(server, options.port ?? 0);
  return Object.assign(app, {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () => closeServer(server),
  });
}
