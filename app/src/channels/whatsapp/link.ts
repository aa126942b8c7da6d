import {
  HttpError,
  ServiceError,
  errorMessage,
  readValidJson,
  whatsappLinkRequestSchema,
  whatsappLinkStatusSchema,
  type Router,
  type ServiceClient,
  type WhatsAppLinkStatus,
} from "@stavrobot/common";
import QRCode from "qrcode";

/** Asks the bridge, passing its error answers on (a 409 "linked already", a 400) and saying when it is down. */
async function ask(
  bridge: ServiceClient,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<WhatsAppLinkStatus> {
  try {
    const { data } = await bridge.request(method, path, {
      ...(body === undefined ? {} : { body }),
      schema: whatsappLinkStatusSchema,
      retries: 0,
    });
    return data;
  } catch (error) {
    if (error instanceof ServiceError && error.status !== undefined && error.status < 500) {
      const message =
        error.body && typeof error.body === "object" && "error" in error.body
          ? String(error.body.error)
          : error.message;
      throw new HttpError(error.status, message);
    }
    throw new HttpError(502, `The WhatsApp bridge does not answer: ${errorMessage(error)}`);
  }
}

/** The state for the page: the pairing code as it is, the QR code only as "there is one" (its image is its own route). */
function forPage(status: WhatsAppLinkStatus): Record<string, unknown> {
  const { qr, ...rest } = status;
  return { ...rest, hasQr: qr !== undefined };
}

/** The QR code's text as an SVG image, drawn here (no outside script or service sees it). */
export async function qrSvg(text: string): Promise<string> {
  return QRCode.toString(text, { type: "svg", errorCorrectionLevel: "L", margin: 2 });
}

/**
 * The WhatsApp page's API (behind the owner's password; only when `[whatsapp]` is configured):
 * the state, the QR code as an SVG image (it rotates: the page asks again), starting to link with
 * a QR code or a pairing code, and unlinking.
 */
export function addWhatsAppLinkRoutes(router: Router, bridge: ServiceClient): void {
  router
    .get("/api/settings/whatsapp", async () => ({ json: forPage(await ask(bridge, "GET", "/link")) }))
    .get("/api/settings/whatsapp/qr.svg", async () => {
      const { qr } = await ask(bridge, "GET", "/link");
      if (!qr) throw new HttpError(404, "No QR code now: start linking, or it was scanned already");
      return {
        body: await qrSvg(qr),
        headers: { "Content-Type": "image/svg+xml; charset=utf-8", "Cache-Control": "no-store" },
      };
    })
    .post("/api/settings/whatsapp/link", async ({ req }) => {
      const request = await readValidJson(req, 4 * 1024, whatsappLinkRequestSchema);
      return { json: forPage(await ask(bridge, "POST", "/link", request)) };
    })
    .post("/api/settings/whatsapp/unlink", async () => ({
      json: forPage(await ask(bridge, "POST", "/unlink")),
    }));
}
