import {
  Router,
  WHATSAPP_SEND_BODY_LIMIT_BYTES,
  readValidJson,
  whatsappLinkRequestSchema,
  whatsappSendRequestSchema,
} from "@stavrobot/common";
import type { WhatsAppConnection } from "./connection.js";
import type { Outbound } from "./outbound.js";

const LINK_BODY_LIMIT_BYTES = 4 * 1024;

/**
 * The bridge's routes (behind the internal secret; `GET /health` is the skeleton's): sending,
 * and linking for the web page (the QR code and the pairing code are only here, never on the
 * open health route).
 */
export function buildRoutes(
  outbound: Pick<Outbound, "send">,
  connection: Pick<WhatsAppConnection, "link" | "unlink" | "linkStatus">,
): Router {
  return new Router()
    .post("/send", async ({ req }) => {
      const request = await readValidJson(req, WHATSAPP_SEND_BODY_LIMIT_BYTES, whatsappSendRequestSchema);
      const { ids } = await outbound.send(request);
      return { json: { ok: true, ids } };
    })
    .get("/link", () => ({ json: connection.linkStatus() }))
    .post("/link", async ({ req }) => {
      const request = await readValidJson(req, LINK_BODY_LIMIT_BYTES, whatsappLinkRequestSchema);
      return { json: await connection.link(request) };
    })
    .post("/unlink", async () => {
      await connection.unlink();
      return { json: connection.linkStatus() };
    });
}
