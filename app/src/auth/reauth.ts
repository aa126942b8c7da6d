import { createHash } from "node:crypto";
import { getOAuthProvider, type OAuthCredentials } from "@mariozechner/pi-ai/oauth";
import { errorMessage, type Logger } from "@stavrobot/common";
import { ownerDestination, type Channel, type OwnerContact } from "../audience.js";

export interface ReauthDeps {
  /** The provider of the configured model. */
  provider: string;
  keys: { invalidate(provider: string): Promise<OAuthCredentials | undefined> };
  /** `<publicHostname>/login`. */
  loginUrl: string;
  owner: OwnerContact;
  /** Queues a message in the deliveries; `key` makes a second hand-over a no-op. */
  tell: (channel: Channel, recipient: string, text: string, key: string) => Promise<void>;
  /** Leaves the owner a note on their console (no push channel). */
  notices: { addNotice(source: string, about: string, text: string): Promise<void> };
  logger: Logger;
}

/** Whether a provider's error says the key was refused (HTTP 401). */
export function isAuthFailure(message: string): boolean {
  return /^\s*401\b/.test(message) || /"type"\s*:\s*"authentication_error"/.test(message);
}

/**
 * The turn engine's `onProviderError` for keys from `authFile`: a 401 removes the refused
 * credentials and sends the owner the login link, on their push channel or else on their console.
 * The link goes out once per removal: a second 401 finds nothing left to remove, and the deliveries
 * key is derived from the removed credentials. Never throws.
 */
export function createReauthHandler(deps: ReauthDeps): (message: string) => Promise<void> {
  return async (message) => {
    if (!isAuthFailure(message)) return;
    const removed = await deps.keys.invalidate(deps.provider);
    if (!removed) return;
    const name = getOAuthProvider(deps.provider)?.name ?? deps.provider;
    const text =
      `The ${name} login was refused by the provider (HTTP 401) and has been removed, ` +
      `so the assistant cannot answer until you log in again: ${deps.loginUrl}`;
    const id = createHash("sha256").update(removed.refresh).digest("hex").slice(0, 16);
    const destination = ownerDestination(deps.owner);
    try {
      if (destination.kind === "channel") {
        await deps.tell(destination.channel, destination.recipient, text, `login:${deps.provider}:${id}`);
      } else {
        await deps.notices.addNotice("login", "(the provider refused the saved login)", text);
      }
    } catch (error) {
      deps.logger.error("could not send the owner the login link", { error: errorMessage(error) });
    }
  };
}
