import type { Logger } from "@stavrobot/common";
import type { ChannelWiring } from "../channels/wiring.js";
import type { ModelWing } from "../model/wiring.js";
import { LoginFlows } from "./login-flow.js";
import { createReauthHandler } from "./reauth.js";

/**
 * The subscription login (`authFile`): renewed in the background, completed on the login page;
 * a provider's 401 removes it and sends the owner the login link. Without `authFile` only the
 * (idle) login page's flows exist.
 */
export function wireLogin(options: {
  model: Pick<ModelWing, "model" | "oauth">;
  publicHostname: string;
  channels: Pick<ChannelWiring, "ownerContact" | "tell" | "notices">;
  logger: Logger;
}): {
  login: LoginFlows;
  loginUrl: string;
  onProviderError: ((message: string) => Promise<void>) | undefined;
  close(): void;
} {
  const { model, oauth } = options.model;
  const { channels, logger } = options;
  const loginUrl = `${options.publicHostname}/login`;
  const login = new LoginFlows({ provider: model.provider, keys: oauth, logger: logger.child("login") });
  oauth?.start(model.provider);
  const onProviderError = oauth
    ? createReauthHandler({
        provider: model.provider,
        keys: oauth,
        loginUrl,
        owner: channels.ownerContact,
        tell: channels.tell,
        notices: channels.notices,
        logger: logger.child("login"),
      })
    : undefined;
  return {
    login,
    loginUrl,
    onProviderError,
    close() {
      login.close();
      oauth?.stop();
    },
  };
}
