import type { IncomingMessage, ServerResponse, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { HttpError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Reply, RequestContext, Router } from "./router.js";

export interface HandlerOptions {
  logger: Logger;
  /** Runs before routing; throw an HttpError (e.g. 401) to refuse the request. */
  guard?: (ctx: Omit<RequestContext, "params">) => void | Promise<void>;
  /** Headers added to every response. */
  headers?: Record<string, string>;
}

/**
 * Turns a Router into a node:http request listener. This is the one place where errors become
 * responses: an HttpError gives its status and message; anything else is logged and answered
 * with a bare 500, never echoing the internal message.
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
    await options.guard?.({ req, res, url });
    const match = router.match(req.method ?? "GET", url.pathname);
    if (match.kind === "not-found") throw new HttpError(404, "Not found");
    if (match.kind === "method-not-allowed") {
      throw new HttpError(405, "Method not allowed", undefined, { Allow: match.allowed.join(", ") });
    }
    const reply = await match.handler({ req, res, url, params: match.params });
    if (reply && !res.headersSent) send(res, reply, options.headers);
  } catch (error) {
    if (res.headersSent) {
      options.logger.error("error after response started", { path: url.pathname, error });
      res.destroy();
      return;
    }
    if (error instanceof HttpError) {
      // A refused body may still be streaming in: close the connection instead of reading it.
      const close: Record<string, string> = error.status === 413 ? { Connection: "close" } : {};
      send(
        res,
        {
          status: error.status,
          json: { error: error.message, ...error.details },
          headers: { ...error.headers, ...close },
        },
        options.headers,
      );
      return;
    }
    options.logger.error("unhandled error", { method: req.method, path: url.pathname, error });
    send(res, { status: 500, json: { error: "Internal server error" } }, options.headers);
  }
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

/** Closes a server, ending idle keep-alive connections so shutdown does not hang. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), 2_000).unref();
  });
}
