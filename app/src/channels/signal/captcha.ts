import type { IncomingMessage } from "node:http";
import {
  HttpError,
  ServiceError,
  badRequest,
  errorMessage,
  mediaType,
  readBody,
  readJsonObject,
  signalChallengeRequestSchema,
  type Router,
  type ServiceClient,
} from "@stavrobot/common";
import { escapeHtml } from "../../html.js";

/** Whether the browser says the request comes from a page of this very host. */
function fromSameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  const host = req.headers.host;
  if (!origin || !host) return false;
  try {
    return new URL(origin).host === host;
  } catch {
    return false;
  }
}

const PAGE_HEAD = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Signal captcha</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}input{width:100%;padding:.5rem;font:inherit}button{margin-top:.75rem;padding:.5rem 1rem;font:inherit}</style></head><body>`;

function page(body: string): { body: string; headers: Record<string, string> } {
  return {
    body: `${PAGE_HEAD}${body}</body></html>`,
    headers: { "Content-Type": "text/html; charset=utf-8" },
  };
}

const FORM = `<h1>Signal asks for a captcha</h1>
<p>Signal rate-limited the assistant's messages. Messages are kept and sent again later; to lift the limit now:</p>
<ol><li>Open <a href="https://signalcaptchas.org/challenge/generate" target="_blank" rel="noopener noreferrer">signalcaptchas.org/challenge/generate</a> and solve the captcha.</li>
<li>Right-click "Open Signal", copy the link (it starts with <code>signalcaptcha://</code>) and paste it here.</li></ol>
<form method="post" action="/signal/captcha"><input name="captcha" placeholder="signalcaptcha://..." required autocomplete="off"><button type="submit">Send to Signal</button></form>`;

/**
 * `GET /signal/captcha` (a page) and `POST /signal/captcha` (`{captcha}` as JSON, or the page's
 * form): the solved captcha goes to the signal-bridge's `POST /challenge`, whose status and body
 * are passed back. Behind the owner's password; only when `[signal]` is configured.
 */
export function addSignalCaptchaRoutes(router: Router, bridge: ServiceClient): void {
  router
    .get("/signal/captcha", () => page(FORM))
    .post("/signal/captcha", async ({ req }) => {
      const form = mediaType(req) === "application/x-www-form-urlencoded";
      // Any web page can make the owner's browser post a form (with its cached password): the
      // page's own form is taken only from this origin.
      if (form && !fromSameOrigin(req))
        throw new HttpError(403, "Forms are accepted only from this site's own pages");
      const raw = form
        ? {
            captcha:
              new URLSearchParams((await readBody(req, 64 * 1024)).toString("utf8")).get("captcha") ?? "",
          }
        : await readJsonObject(req, 64 * 1024);
      const parsed = signalChallengeRequestSchema.safeParse(raw);
      if (!parsed.success) throw badRequest("'captcha' must be the signalcaptcha:// link");
      let status: number;
      let body: unknown;
      try {
        ({ status, data: body } = await bridge.request("POST", "/challenge", {
          body: parsed.data,
          retries: 0,
        }));
      } catch (error) {
        if (!(error instanceof ServiceError) || error.status === undefined) {
          throw new HttpError(502, `The Signal bridge is unreachable: ${errorMessage(error)}`);
        }
        status = error.status;
        body = error.body;
      }
      if (!form) return { status, json: body };
      const ok = status >= 200 && status < 300;
      const detail =
        body && typeof body === "object" && "error" in body ? String(body.error) : `HTTP ${status}`;
      return {
        status,
        ...page(
          ok
            ? "<h1>Done</h1><p>Signal accepted the captcha. Kept messages go out with the next retry.</p>"
            : `<h1>Not accepted</h1><p>${escapeHtml(detail)}</p><p><a href="/signal/captcha">Try again</a></p>`,
        ),
      };
    });
}
