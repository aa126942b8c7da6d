import { WHATSAPP_ATTACHMENT_LIMIT_BYTES, errorMessage, whatsappBridgeHealthSchema } from "@stavrobot/common";
import type { ChannelContext, ChannelDefinition } from "../channel.js";
import { composeWhole } from "../channel.js";
import { addWhatsAppLinkRoutes } from "./link.js";
import { WhatsAppSender } from "./sender.js";

/** How often the app asks the bridge how the connection is, to tell the owner when it breaks. */
const WATCH_INTERVAL_MS = 60_000;

/** States worth telling the owner about (on another channel when they have one). */
const BROKEN: Record<string, string> = {
  loggedOut: "WhatsApp logged the assistant's number out",
  replaced: "another WhatsApp Web session replaced the assistant's",
  outdated: "WhatsApp refuses the bridge's version",
  failing: "the WhatsApp connection keeps failing",
};

/**
 * WhatsApp, in a sidecar (`whatsapp-bridge`: Baileys holds the linked session). The Markdown goes
 * to the bridge whole, which turns it into WhatsApp's formatting; the number is linked from the
 * web admin's WhatsApp page.
 */
export const whatsappChannel: ChannelDefinition = {
  name: "whatsapp",
  title: "WhatsApp",
  configured: (config) => config.whatsapp !== undefined,
  idDescription: "phone number in international form (+15555550123)",
  isId: (text) => /^\+[1-9]\d{1,14}$/.test(text),
  normalize: (identifier) => identifier.trim(),
  maxAttachmentBytes: WHATSAPP_ATTACHMENT_LIMIT_BYTES,
  compose: composeWhole,
  plainText: (payload) => payload.text ?? "",
  sender: ({ whatsappBridge, publicHostname }) =>
    whatsappBridge ? new WhatsAppSender(whatsappBridge, `${publicHostname}/settings/whatsapp`) : undefined,
  // Its messages come through the bridge's outbox to the internal POST /chat; the linking page's API is here.
  addRoutes(router, { whatsappBridge }) {
    if (whatsappBridge) addWhatsAppLinkRoutes(router, whatsappBridge);
  },
  start: (context) => watchConnection(context),
  status: async (_context, siblings) => {
    const bridge = (await siblings).find((sibling) => sibling.name === "whatsapp-bridge");
    const body = whatsappBridgeHealthSchema.partial().safeParse(bridge?.body ?? {});
    const health = body.success ? body.data : {};
    return {
      configured: true,
      bridgeOk: bridge?.ok ?? false,
      whatsapp: health.whatsapp ?? "unknown",
      ...(health.problem ? { problem: health.problem } : {}),
      ...(health.account ? { account: health.account } : {}),
      ...(health.lastInbound ? { lastInbound: health.lastInbound } : {}),
      ...(health.lastError ? { lastError: health.lastError } : {}),
    };
  },
  check: (status) => {
    const { bridgeOk, whatsapp, problem } = status as unknown as {
      bridgeOk: boolean;
      whatsapp: string;
      problem?: string;
    };
    if (!bridgeOk) {
      return {
        name: "whatsapp",
        state: "fail",
        detail: "the WhatsApp bridge does not answer",
        fix: "npm start restarts it; its log says why it stopped.",
      };
    }
    if (whatsapp !== "open") {
      return {
        name: "whatsapp",
        state: "fail",
        detail: `WhatsApp is ${whatsapp}: nothing is sent or received${problem ? ` (${problem})` : ""}`,
        fix:
          whatsapp === "outdated"
            ? "Set [whatsapp] version in config.toml to WhatsApp Web's current version, or update the bridge."
            : "Link the number on the web page's WhatsApp page (Settings → WhatsApp); the bridge's log says more.",
      };
    }
    return { name: "whatsapp", state: "ok", detail: "the bridge runs and WhatsApp is open" };
  },
};

/**
 * Asks the bridge every minute how the connection is and tells the owner, once per breakage, when
 * it broke (logged out, replaced, outdated, failing): on another of their push channels, never on
 * WhatsApp itself (it would wait there for the connection it tells of); with no other, on their
 * console.
 */
export function watchConnection(
  context: Pick<ChannelContext, "whatsappBridge" | "tellOwner" | "publicHostname" | "logger">,
  intervalMs = WATCH_INTERVAL_MS,
): () => void {
  const bridge = context.whatsappBridge;
  if (!bridge) return () => undefined;
  let last = "";
  const check = async (): Promise<void> => {
    try {
      const { data } = await bridge.request("GET", "/health", {
        schema: whatsappBridgeHealthSchema,
        retries: 0,
        timeoutMs: 5_000,
      });
      const broken = BROKEN[data.whatsapp];
      if (broken && data.whatsapp !== last) {
        await context.tellOwner(
          `${broken}: ${data.problem ?? data.whatsapp}. Messages to WhatsApp wait until it is open again; the WhatsApp page is at ${context.publicHostname}/settings/whatsapp.`,
          `whatsapp-state:${data.whatsapp}:${data.lastErrorAt ?? new Date().toISOString()}`,
          "(WhatsApp's connection)",
          "whatsapp",
        );
      }
      last = data.whatsapp;
    } catch (error) {
      context.logger.debug("could not ask the WhatsApp bridge how it is", { error: errorMessage(error) });
    }
  };
  const timer = setInterval(() => void check(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
