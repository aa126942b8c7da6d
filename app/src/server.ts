import type { RequestListener } from "node:http";
import {
  HttpError,
  Router,
  checkBasicPassword,
  checkBearer,
  createRequestListener,
  type Logger,
} from "@stavrobot/common";
import { createChatHandler, type ChatDeps } from "./routes/chat.js";

export interface ServerDeps extends ChatDeps {
  password: string;
  internalSecret: string;
  logger: Logger;
}

/** Routes anyone may call without the owner's password. */
const PUBLIC_ROUTES: { method: string; path: RegExp }[] = [{ method: "GET", path: /^\/health$/ }];

export function isPublicRoute(method: string, pathname: string): boolean {
  return PUBLIC_ROUTES.some((route) => route.method === method && route.path.test(pathname));
}

const unauthorized = (): HttpError =>
  new HttpError(401, "Unauthorized", undefined, {
    "WWW-Authenticate": 'Basic realm="stavrobot", charset="UTF-8"',
  });

/**
 * Two listeners: the external one (owner's password, HTTP Basic, username ignored) and the
 * internal one (sibling services, Bearer internal secret) that only accepts `POST /chat`.
 */
export function buildServer(deps: ServerDeps): { external: RequestListener; internal: RequestListener } {
  const chat = createChatHandler(deps);
  const external = new Router().get("/health", () => ({ json: { status: "ok" } })).post("/chat", chat);
  const internal = new Router().post("/chat", chat);
  const securityHeaders = { "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store" };
  return {
    external: createRequestListener(external, {
      logger: deps.logger,
      headers: securityHeaders,
      guard: ({ req, url }) => {
        if (isPublicRoute(req.method ?? "GET", url.pathname)) return;
        if (!checkBasicPassword(req.headers.authorization, deps.password)) throw unauthorized();
      },
    }),
    internal: createRequestListener(internal, {
      logger: deps.logger.child("internal"),
      headers: securityHeaders,
      guard: ({ req }) => {
        if (!checkBearer(req.headers.authorization, deps.internalSecret))
          throw new HttpError(401, "Unauthorized");
      },
    }),
  };
}
