import { createServer } from "node:http";
import type { IncomingMessage, RequestListener, ServerResponse, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { DomainError, HttpError } from "../errors.js";
import type { DomainErrorKind } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Reply, RequestContext, Router } from "./router.js";

export interface HandlerOptions {
  logger: Logger;
  /**
   * Runs before the handler, and before a missing route or method is answered (so a caller
   * without credentials learns nothing of which routes exist); throw an HttpError (e.g. 401) to
   * refuse the request. `publicRoute`: the request matched a route declared public.
   */
  guard?: (ctx: Omit<RequestContext, "params"> & { publicRoute: boolean }) => void | Promise<void>;
  /** Headers added to every response. */
  headers?: Record<string, string>;
  /** The answer to an error of the service's own that is not the caller's fault (e.g. a database outage: 503). */
  mapError?: (error: unknown) => HttpError | undefined;
  /**
   * A page for an error, in place of its JSON (the app's HTML pages for a browser that opened an
   * address): undefined keeps the JSON. Its status and the error's headers (`WWW-Authenticate`,
   * `Retry-After`) are kept; a page that cannot be made leaves the JSON too.
   */
  errorPage?: (ctx: { req: IncomingMessage; url: URL; error: HttpError }) => Promise<Reply | undefined>;
}

/** The one mapping of domain errors to HTTP statuses. */
export const DOMAIN_ERROR_STATUS: Readonly<Record<DomainErrorKind, number>> = {
  invalid: 400,
  forbidden: 403,
  "not-found": 404,
  conflict: 409,
  "too-large": 413,
  failed: 422,
  "rate-limited": 429,
  upstream: 502,
  unavailable: 503,
};

/**
 * A DomainError as the HttpError it is answered with: `{error, kind, ...details}`, so a caller
 * tells errors apart by their kind (and a detail such as `reason`), never by their words; a rate
 * limit's wait also as `Retry-After`.
 */
export function toHttpError(error: DomainError): HttpError {
  const wait = error.details?.retryAfterSeconds;
  const headers =
    error.kind === "rate-limited" && typeof wait === "number" ? { "Retry-After": String(wait) } : undefined;
  return new HttpError(
    DOMAIN_ERROR_STATUS[error.kind],
    error.message,
    { kind: error.kind, ...error.details },
    headers,
  );
}

/**
 * Turns a Router into a node:http request listener. This is the one place where errors become
 * responses: an HttpError gives its status and message, a DomainError the status of its kind
 * (`DOMAIN_ERROR_STATUS`) and its message, an error `mapError` knows its answer; anything else is
 * logged and answered with a bare 500, never echoing the internal message.
 */
export function createRequestListener(router: Router, options: HandlerOptions) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    void handle(router, options, req, res);
  };
}

async function handle(
  router: Router,
  options: HandlerOptions,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  let url: URL;
  try {
    url = new URL(req.url ?? "/", "http://localhost");
  } catch {
    send(res, { status: 400, json: { error: "Invalid request URL" } }, options.headers);
    return;
  }
  try {
    const match = router.match(req.method ?? "GET", url.pathname);
    await options.guard?.({ req, res, url, publicRoute: match.kind === "found" && match.public });
    if (match.kind === "not-found") throw new HttpError(404, "Not found");
    if (match.kind === "method-not-allowed") {
      throw new HttpError(405, "Method not allowed", undefined, { Allow: match.allowed.join(", ") });
    }
    const reply = await match.handler({ req, res, url, params: match.params });
    if (reply && !res.headersSent) send(res, reply, withClose(req, options.headers));
  } catch (error) {
    if (res.headersSent) {
      options.logger.error("error after response started", { path: url.pathname, error });
      res.destroy();
      return;
    }
    const mapped = error instanceof DomainError ? toHttpError(error) : (options.mapError?.(error) ?? error);
    if (!(mapped instanceof HttpError))
      options.logger.error("unhandled error", { method: req.method, path: url.pathname, error });
    // Never the internal message of an error nobody mapped.
    const known = mapped instanceof HttpError ? mapped : new HttpError(500, "Internal server error");
    const page = await errorPage(options, req, url, known);
    send(
      res,
      page
        ? { ...page, status: known.status, headers: { ...known.headers, ...page.headers } }
        : { status: known.status, json: { error: known.message, ...known.details }, headers: known.headers },
      withClose(req, options.headers),
    );
  }
}

async function errorPage(
  options: HandlerOptions,
  req: IncomingMessage,
  url: URL,
  error: HttpError,
): Promise<Reply | undefined> {
  if (!options.errorPage) return undefined;
  try {
    return await options.errorPage({ req, url, error });
  } catch (failure) {
    options.logger.error("could not make the error's page", { path: url.pathname, error: failure });
    return undefined;
  }
}

/**
 * Answered before the whole body arrived (refused, unauthenticated, too large): close the
 * connection after the answer instead of reading what is left, so a client trickling a body can
 * never hold a socket after it was told no.
 */
function withClose(req: IncomingMessage, headers: Record<string, string> = {}): Record<string, string> {
  return req.complete ? headers : { ...headers, Connection: "close" };
}

export interface HttpServerLimits {
  /** Time allowed to receive a whole request (headers and body); not the time to answer it. */
  requestTimeoutMs?: number;
  /** Time allowed to receive the headers. */
  headersTimeoutMs?: number;
  /** Open connections beyond this are refused. */
  maxConnections?: number;
}

export const DEFAULT_HTTP_LIMITS: Required<HttpServerLimits> = {
  requestTimeoutMs: 120_000,
  headersTimeoutMs: 20_000,
  maxConnections: 512,
};

/**
 * A node:http server with bounded receive times and a connection cap. A request whose body is
 * still arriving when `requestTimeoutMs` passes is answered 408 and its connection closed; a turn
 * that takes minutes to answer is not affected, since the timeout ends when the request is read.
 */
export function createHttpServer(listener: RequestListener, limits: HttpServerLimits = {}): Server {
  const { requestTimeoutMs, headersTimeoutMs, maxConnections } = { ...DEFAULT_HTTP_LIMITS, ...limits };
  const server = createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs),
      // How often Node checks those timeouts; the default (30 s) would make short ones meaningless.
      connectionsCheckingInterval: Math.max(100, Math.min(5_000, Math.floor(requestTimeoutMs / 4))),
    },
    listener,
  );
  server.maxConnections = maxConnections;
  return server;
}

export function send(res: ServerResponse, reply: Reply, extraHeaders: Record<string, string> = {}): void {
  const headers: Record<string, string> = { ...extraHeaders, ...reply.headers };
  let body: string | Buffer = "";
  if (reply.json !== undefined) {
    body = JSON.stringify(reply.json);
    headers["Content-Type"] ??= "application/json; charset=utf-8";
  } else if (reply.body !== undefined) {
    body = reply.body;
  }
  headers["Content-Length"] = String(Buffer.byteLength(body));
  res.writeHead(reply.status ?? 200, headers);
  res.end(body);
}

/** Listens and resolves with the bound port (pass 0 for an ephemeral port in tests). */
export function listen(server: Server, port: number, host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * Closes a server: no new connections, idle keep-alive connections ended at once, requests in
 * flight given `graceMs` to be answered before their connections are cut.
 */
export function closeServer(server: Server, graceMs = 2_000): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    // An answered request leaves an idle connection behind: end those as they appear.
    const sweep = setInterval(() => server.closeIdleConnections(), 100);
    sweep.unref();
    setTimeout(() => {
      clearInterval(sweep);
      server.closeAllConnections();
    }, graceMs).unref();
    server.once("close", () => clearInterval(sweep));
  });
}
