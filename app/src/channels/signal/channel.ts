import { SIGNAL_ATTACHMENT_LIMIT_BYTES } from "@stavrobot/common";
import { composeWhole, type ChannelDefinition } from "../channel.js";
import { addSignalCaptchaRoutes } from "./captcha.js";
import { SignalSender } from "./sender.js";

/**
 * Signal, in a sidecar (`signal-bridge`: signal-cli's daemon holds the account). The Markdown goes
 * whole: the bridge turns it into Signal's text styles, and signal-cli sends a long text as an
 * attachment itself.
 */
export const signalChannel: ChannelDefinition = {
  name: "signal",
  title: "Signal",
  configured: (config) => config.signal !== undefined,
  idDescription: "phone number in international form (+15555550123)",
  isId: (text) => /^\+[1-9]\d{1,14}$/.test(text),
  normalize: (identifier) => identifier.trim(),
  maxAttachmentBytes: SIGNAL_ATTACHMENT_LIMIT_BYTES,
  compose: composeWhole,
  plainText: (payload) => payload.text ?? "",
  sender: ({ signalBridge, publicHostname }) =>
    signalBridge ? new SignalSender(signalBridge, `${publicHostname}/signal/captcha`) : undefined,
  // Its messages come through the bridge's outbox to the internal POST /chat; the owner's page for
  // a rate limit's captcha is here.
  addRoutes(router, { signalBridge }) {
    if (signalBridge) addSignalCaptchaRoutes(router, signalBridge);
  },
  // As up as its bridge and the bridge's signal-cli (a bridge that answers while signal-cli is
  // missing or keeps dying sends nothing).
  status: async (_context, siblings) => {
    const bridge = (await siblings).find((sibling) => sibling.name === "signal-bridge");
    const body = bridge?.body as { signalCli?: unknown; problem?: unknown } | undefined;
    return {
      configured: true,
      bridgeOk: bridge?.ok ?? false,
      signalCli: typeof body?.signalCli === "string" ? body.signalCli : "unknown",
      // Why signal-cli does not run, and what to do (the bridge's words).
      ...(typeof body?.problem === "string" ? { problem: body.problem } : {}),
    };
  },
  check: (status) => {
    const { bridgeOk, signalCli, problem } = status as unknown as {
      bridgeOk: boolean;
      signalCli: string;
      problem?: string;
    };
    if (!bridgeOk) {
      return {
        name: "signal",
        state: "fail",
        detail: "the signal bridge does not answer",
        fix: "npm start restarts it; its log says why it stopped.",
      };
    }
    if (signalCli !== "running") {
      return {
        name: "signal",
        state: "fail",
        detail: `signal-cli is ${signalCli}: nothing is sent or received${problem ? ` (${problem})` : ""}`,
        fix:
          signalCli === "missing"
            ? "Install signal-cli (signal-bridge/README.md) or set SIGNAL_CLI_PATH to it, then register the account; the bridge finds it within a minute."
            : "Install signal-cli and register the account (signal-bridge/README.md); the bridge's log says why it does not start.",
      };
    }
    return { name: "signal", state: "ok", detail: "the bridge and signal-cli run" };
  },
};
