import { setTimeout as sleep } from "node:timers/promises";
import {
  getOAuthProvider,
  type OAuthCredentials,
  type OAuthProviderInterface,
} from "@mariozechner/pi-ai/oauth";
import { errorMessage, type Logger } from "@stavrobot/common";
import { isCredentials, type CredentialsFile } from "./credentials-file.js";

/** How often the background refresh looks at the credentials. */
export const REFRESH_INTERVAL_MS = 30 * 60_000;
/** Pauses before the retries of a refresh that failed for a passing reason (network, 5xx, 429). */
export const REFRESH_RETRY_DELAYS_MS: readonly number[] = [1_000, 2_000, 4_000];

/** Why there is no key, as the owner is told (after "Authentication required. Visit … to log in."). */
export const NO_KEY_REASONS = {
  noLogin: "No subscription login is saved yet.",
  unreadable: "The saved login could not be read from authFile (the log says why).",
  refused: "The saved login expired and the provider refused to renew it.",
  unreachable: "The saved login expired and could not be renewed: the provider could not be reached.",
  revoked: "The provider refused the saved login (HTTP 401), so it was removed.",
} as const;

export interface OAuthKeysDeps {
  file: CredentialsFile;
  logger: Logger;
  now?: () => number;
  retryDelaysMs?: readonly number[];
  refreshIntervalMs?: number;
}

/** Credentials in use, and the refresh token the file holds for them (they may be newer than the file). */
interface Found {
  credentials: OAuthCredentials;
  fileRefresh: string | undefined;
}

/**
 * Keys from the OAuth credentials in `authFile`. `getApiKey` never throws (pi-agent-core's rule):
 * whatever goes wrong (no login, an unreadable file, a refresh the provider refuses) is logged
 * and remembered, and it resolves with undefined; `missingKeyMessage` then tells the sender why
 * and where to log in. Expired credentials are renewed when a key is asked for and, ahead of
 * time, in the background; one refresh per provider at a time, since refresh tokens rotate.
 */
export class OAuthKeys {
  private readonly now: () => number;
  private readonly retryDelays: readonly number[];
  private readonly interval: number;
  /** Why the last request for a provider's key found none. */
  private readonly problems = new Map<string, string>();
  private readonly refreshing = new Map<string, Promise<OAuthCredentials | undefined>>();
  /** Renewed credentials the file could not take yet, with the refresh token they replace there. */
  private readonly unsaved = new Map<string, { credentials: OAuthCredentials; replaces: string }>();
  /** Refresh tokens of credentials the provider refused: ignored even if the file could not be rewritten. */
  private readonly revoked = new Map<string, Set<string>>();
  /** The last key handed out per provider, so a 401 removes only the credentials it was about. */
  private readonly handedOut = new Map<string, string>();
  private readonly stopped = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: OAuthKeysDeps) {
    this.now = deps.now ?? Date.now;
    this.retryDelays = deps.retryDelaysMs ?? REFRESH_RETRY_DELAYS_MS;
    this.interval = deps.refreshIntervalMs ?? REFRESH_INTERVAL_MS;
  }

  /** A key for `provider`, renewing its credentials first when they expired; undefined when there is none. */
  async getApiKey(provider: string): Promise<string | undefined> {
    try {
      return await this.resolveKey(provider);
    } catch (error) {
      // Nothing above is expected to throw; if it does, the turn still gets a message, not an exception.
      return this.noKey(provider, NO_KEY_REASONS.unreadable, error);
    }
  }

  /** What a turn that found no key tells its sender. */
  missingKeyMessage(provider: string, loginUrl: string): string {
    if (!getOAuthProvider(provider)) {
      return (
        `The provider "${provider}" has no subscription login, so authFile cannot give it a key: ` +
        `set apiKey in config.toml instead.`
      );
    }
    const reason = this.problems.get(provider);
    return `Authentication required. Visit ${loginUrl} to log in.${reason ? ` (${reason})` : ""}`;
  }

  /** Stores the credentials of a completed login; the next key request uses them. Throws when the file cannot be written. */
  async save(provider: string, credentials: OAuthCredentials): Promise<void> {
    await this.deps.file.update(provider, () => credentials);
    this.unsaved.delete(provider);
    this.revoked.delete(provider);
    this.problems.delete(provider);
  }

  /**
   * The provider refused a key (HTTP 401): its credentials are removed from the file, if they are
   * still those of the last key handed out. Resolves with the removed credentials, or undefined
   * when there was nothing to remove (already removed, or replaced by a newer login). Never throws.
   */
  async invalidate(provider: string): Promise<OAuthCredentials | undefined> {
    try {
      const oauth = getOAuthProvider(provider);
      const found = oauth ? await this.current(provider) : undefined;
      if (!oauth || !found) return undefined;
      if (this.handedOut.get(provider) !== oauth.getApiKey(found.credentials)) return undefined;
      const refused = this.revoked.get(provider) ?? new Set<string>();
      refused.add(found.credentials.refresh);
      if (found.fileRefresh !== undefined) refused.add(found.fileRefresh);
      this.revoked.set(provider, refused);
      this.unsaved.delete(provider);
      this.handedOut.delete(provider);
      this.problems.set(provider, NO_KEY_REASONS.revoked);
      this.deps.logger.warn("the provider refused the saved login; removing it", { provider });
      try {
        await this.deps.file.update(provider, (stored) =>
          stored && refused.has(stored.refresh) ? null : undefined,
        );
      } catch (error) {
        this.deps.logger.error("could not remove the refused login from authFile; it is ignored", {
          provider,
          error: brief(error),
        });
      }
      return found.credentials;
    } catch (error) {
      this.deps.logger.error("could not invalidate the saved login", { provider, error: brief(error) });
      return undefined;
    }
  }

  /** Renews `provider`'s credentials now and every interval whenever they would expire before the next look. */
  start(provider: string): void {
    if (this.timer || this.stopped.signal.aborted) return;
    const look = (): void => void this.refreshIfDue(provider);
    look();
    this.timer = setInterval(look, this.interval);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.stopped.abort();
  }

  /**
   * Renews the credentials when they expire before the next background look; logs (once) when
   * there is nothing to renew. Never throws.
   */
  async refreshIfDue(provider: string): Promise<void> {
    try {
      const oauth = getOAuthProvider(provider);
      if (!oauth) return void this.noKey(provider, noOAuth(provider));
      const found = await this.current(provider);
      if (!found) return void this.noKey(provider, this.reasonForNone(provider));
      // A minute of slack, so a look that comes a little late still finds them valid.
      if (found.credentials.expires - this.now() > this.interval + 60_000) return;
      await this.refresh(provider, oauth, found);
    } catch (error) {
      this.noKey(provider, NO_KEY_REASONS.unreadable, error);
    }
  }

  private async resolveKey(provider: string): Promise<string | undefined> {
    const oauth = getOAuthProvider(provider);
    if (!oauth) return this.noKey(provider, noOAuth(provider));
    let found: Found | undefined;
    try {
      found = await this.current(provider);
    } catch (error) {
      return this.noKey(provider, NO_KEY_REASONS.unreadable, error);
    }
    if (!found) return this.noKey(provider, this.reasonForNone(provider));
    let credentials: OAuthCredentials | undefined = found.credentials;
    const unsaved = this.unsaved.get(provider);
    if (unsaved && unsaved.credentials === credentials)
      await this.persist(provider, credentials, unsaved.replaces);
    if (this.now() >= credentials.expires) {
      credentials = await this.refresh(provider, oauth, found);
      if (!credentials) return undefined;
    }
    const key = oauth.getApiKey(credentials);
    this.handedOut.set(provider, key);
    this.problems.delete(provider);
    return key;
  }

  /** The credentials in use: the file's, or renewed ones it could not take yet; none once refused. */
  private async current(provider: string): Promise<Found | undefined> {
    const stored = await this.deps.file.get(provider);
    if (stored && this.revoked.get(provider)?.has(stored.refresh)) return undefined;
    const unsaved = this.unsaved.get(provider);
    if (unsaved) {
      if (stored?.refresh === unsaved.replaces)
        return { credentials: unsaved.credentials, fileRefresh: stored.refresh };
      // The file changed since (a new login, a hand edit): its content wins.
      this.unsaved.delete(provider);
    }
    return stored ? { credentials: stored, fileRefresh: stored.refresh } : undefined;
  }

  /** One refresh per provider at a time: concurrent callers share it. */
  private refresh(
    provider: string,
    oauth: OAuthProviderInterface,
    found: Found,
  ): Promise<OAuthCredentials | undefined> {
    const running = this.refreshing.get(provider);
    if (running) return running;
    const started = this.renew(provider, oauth, found).finally(() => this.refreshing.delete(provider));
    this.refreshing.set(provider, started);
    return started;
  }

  private async renew(
    provider: string,
    oauth: OAuthProviderInterface,
    found: Found,
  ): Promise<OAuthCredentials | undefined> {
    for (let attempt = 0; ; attempt++) {
      let renewed: OAuthCredentials;
      try {
        renewed = await oauth.refreshToken(found.credentials);
      } catch (error) {
        const transient = isTransient(error);
        const delay = this.retryDelays[attempt];
        if (!transient || delay === undefined || this.stopped.signal.aborted) {
          return this.noKey(provider, transient ? NO_KEY_REASONS.unreachable : NO_KEY_REASONS.refused, error);
        }
        this.deps.logger.warn("renewing the login failed; trying again", {
          provider,
          attempt: attempt + 1,
          error: brief(error),
        });
        try {
          await sleep(delay, undefined, { signal: this.stopped.signal });
        } catch {
          return this.noKey(provider, NO_KEY_REASONS.unreachable, error);
        }
        continue;
      }
      if (!isCredentials(renewed)) {
        return this.noKey(provider, NO_KEY_REASONS.refused, new Error("the refresh answer held no tokens"));
      }
      this.deps.logger.info("renewed the login", { provider });
      if (found.fileRefresh !== undefined) await this.persist(provider, renewed, found.fileRefresh);
      return renewed;
    }
  }

  /**
   * Writes renewed credentials over the ones they replace (not over a login made meanwhile). When
   * the write fails they are kept in memory, used, and written by a later request.
   */
  private async persist(provider: string, renewed: OAuthCredentials, replaces: string): Promise<void> {
    try {
      await this.deps.file.update(provider, (stored) => (stored?.refresh === replaces ? renewed : undefined));
      this.unsaved.delete(provider);
    } catch (error) {
      if (!this.unsaved.has(provider)) {
        this.deps.logger.error("could not write the renewed login to authFile; keeping it in memory", {
          provider,
          error: brief(error),
        });
      }
      this.unsaved.set(provider, { credentials: renewed, replaces });
    }
  }

  /** No credentials: never saved, or removed after a 401 (which stays the reason until a new login). */
  private reasonForNone(provider: string): string {
    return this.problems.get(provider) === NO_KEY_REASONS.revoked
      ? NO_KEY_REASONS.revoked
      : NO_KEY_REASONS.noLogin;
  }

  /** Remembers (and logs, when it changed) why there is no key; always undefined. */
  private noKey(provider: string, reason: string, error?: unknown): undefined {
    if (this.problems.get(provider) !== reason || error !== undefined) {
      this.deps.logger.warn("no key from authFile", {
        provider,
        reason,
        ...(error === undefined ? {} : { error: brief(error) }),
      });
    }
    this.problems.set(provider, reason);
    return undefined;
  }
}

function noOAuth(provider: string): string {
  return `pi-ai has no subscription login for "${provider}".`;
}

/**
 * Whether a failed refresh may work if tried again: no answer (network, timeout), a 5xx, 408 or
 * 429. pi-ai's refresh errors carry the status as `status=NNN`.
 */
export function isTransient(error: unknown): boolean {
  const text = errorMessage(error);
  const status = /\bstatus[=: ]+(\d{3})\b/i.exec(text)?.[1] ?? /^(\d{3})\b/.exec(text.trim())?.[1];
  if (!status) return true;
  return status.startsWith("5") || status === "408" || status === "429";
}

/** An error in a line: pi-ai's OAuth errors append a stack trace, which says nothing useful here. */
export function brief(error: unknown): string {
  return (errorMessage(error).split("; stack=")[0] ?? "").slice(0, 500);
}
