import {
  Router,
  SIGNAL_SEND_BODY_LIMIT_BYTES,
  readValidJson,
  signalChallengeRequestSchema,
  signalSendRequestSchema,
} from "@stavrobot/common";
import type { Outbound } from "./outbound.js";

const CHALLENGE_BODY_LIMIT_BYTES = 64 * 1024;

/**
 * The bridge's routes (behind the internal secret; `GET /health` is the skeleton's). Handlers
 * validate with the contract, call the domain and answer; its DomainErrors become JSON in common's
 * listener.
 */
export function buildRoutes(outbound: Pick<Outbound, "send" | "submitChallenge">): Router {
  return new Router()
    .post("/send", async ({ req }) => {
      const request = await readValidJson(req, SIGNAL_SEND_BODY_LIMIT_BYTES, signalSendRequestSchema);
      const { timestamp } = await outbound.send(request);
      return { json: { ok: true, timestamp } };
    })
    .post("/challenge", async ({ req }) => {
      const { captcha } = await readValidJson(req, CHALLENGE_BODY_LIMIT_BYTES, signalChallengeRequestSchema);
      await outbound.submitChallenge(captcha);
      return { json: { ok: true } };
    });
}
