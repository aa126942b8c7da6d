import { readFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { join } from "node:path";
import { readValidJson, type Reply, type Router } from "@stavrobot/common";
import { z } from "zod";
import type { LoginEvent, LoginFlows } from "../auth/login-flow.js";
import { WEB_DIR } from "../web/pages.js";

/** The page's own files (until the web UI's `/assets/` route serves them). */
const FILES: Record<string, string> = {
  "login.html": "text/html; charset=utf-8",
  "login.js": "text/javascript; charset=utf-8",
  "login.css": "text/css; charset=utf-8",
};

/** The page runs only its own script and style, talks only to this site, and is never framed. */
const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const respondSchema = z.strictObject({ value: z.string().max(8192) });

/** A comment line every so often keeps proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;

/**
 * The subscription login, behind the owner's password like every page:
 * - `GET /login`: the page (`app/web/login.html`, with `login.js` and `login.css` beside it);
 * - `GET /login/events`: Server-Sent Events of the running login (started if none runs): `start`,
 *   `auth`, `prompt`, `progress`, then `success` or `failure`; a page that reconnects first gets
 *   the state so far;
 * - `POST /login/respond {value}`: answers the open prompt (409 when there is none).
 */
export function addLoginRoutes(router: Router, flows: LoginFlows, webDir = WEB_DIR): void {
  const file = (name: string) => async (): Promise<Reply> => ({
    body: await readFile(join(webDir, name)),
    headers: {
      "Content-Type": FILES[name] as string,
      ...(name.endsWith(".html") ? { "Content-Security-Policy": PAGE_CSP } : {}),
    },
  });
  router
    .get("/login", file("login.html"))
    .get("/login/login.js", file("login.js"))
    .get("/login/login.css", file("login.css"))
    .get("/login/events", ({ res }) => {
      streamLogin(flows, res);
      return undefined;
    })
    .post("/login/respond", async ({ req }) => {
      const { value } = await readValidJson(req, 16 * 1024, respondSchema);
      flows.respond(value);
      return { json: { ok: true } };
    });
}

function streamLogin(flows: LoginFlows, res: ServerResponse): void {
  res.writeHead(200, {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    // Proxies such as nginx would otherwise hold the events back.
    "X-Accel-Buffering": "no",
  });
  // A page that loses the stream tries again after 3 s, and then re-attaches to the same login.
  res.write("retry: 3000\n\n");
  const heartbeat = setInterval(() => res.write(": still here\n\n"), HEARTBEAT_MS);
  heartbeat.unref();
  // The state so far comes before `follow` returns, possibly with the end of the login in it.
  let returned = false;
  let finished = false;
  const stopFollowing = flows.follow((event) => {
    if (res.writableEnded) return;
    res.write(formatEvent(event));
    finished ||= event.type === "success" || event.type === "failure";
    if (finished && returned) end();
  });
  returned = true;
  function end(): void {
    clearInterval(heartbeat);
    stopFollowing();
    if (!res.writableEnded) res.end();
  }
  res.on("close", end);
  if (finished) end();
}

function formatEvent(event: LoginEvent): string {
  const { type, ...data } = event;
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}
