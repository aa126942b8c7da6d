import type { ServerResponse } from "node:http";
import { readValidJson, type Router } from "@stavrobot/common";
import { z } from "zod";
import { endsLogin, type LoginEvent, type LoginFlows } from "../auth/login-flow.js";

/** The admin UI's page for it (`app/web/pages/subscription.html`, with the navigation). */
export const SUBSCRIPTION_PAGE = "/settings/subscription";

const respondSchema = z.strictObject({ value: z.string().max(8192) });

/** A comment line every so often keeps proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;

/**
 * Signing in to the provider with a subscription, behind the owner's password like every page:
 * - `GET /login`: the address earlier versions and the assistant's messages give, sent on to the
 *   Provider subscription page (`/settings/subscription`, one of the admin UI's pages);
 * - `GET /login/events`: Server-Sent Events of the running login (started if none runs): `start`,
 *   `auth`, `prompt`, `progress`, then `success` or `failure`, or only `unavailable` when this
 *   configuration has no sign-in (no `authFile`, a provider without one); a page that reconnects
 *   first gets the state so far;
 * - `POST /login/respond {value}`: answers the open prompt (409 when there is none).
 */
export function addLoginRoutes(router: Router, flows: LoginFlows): void {
  router
    .get("/login", () => ({ status: 302, headers: { Location: SUBSCRIPTION_PAGE } }))
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
    finished ||= endsLogin(event);
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
