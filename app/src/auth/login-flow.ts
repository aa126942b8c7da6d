import { getOAuthProvider, type OAuthCredentials, type OAuthPrompt } from "@mariozechner/pi-ai/oauth";
import { DomainError, type Logger } from "@stavrobot/common";
import { isCredentials } from "./credentials-file.js";
import { brief } from "./oauth-keys.js";

/** What the login page is told, in order; a page that connects later first gets the state so far. */
export type LoginEvent =
  | { type: "start"; provider: string; name: string }
  /** Open this address (instructions may carry a device code to type there). */
  | { type: "auth"; url: string; instructions?: string }
  /** Waiting for `POST /login/respond`: a pasted code or redirect address, or an answer. */
  | { type: "prompt"; message: string; placeholder?: string; allowEmpty: boolean }
  | { type: "progress"; message: string }
  | { type: "success"; provider: string; name: string }
  /** Named so, not "error": a browser's EventSource keeps "error" for its own connection errors. */
  | { type: "failure"; message: string }
  /** No sign-in can start with this configuration (no authFile, a provider without one): what to set. */
  | { type: "unavailable"; message: string };

/** Whether the event is a login's last: it succeeded, failed, or could not start. */
export function endsLogin(event: LoginEvent): boolean {
  return event.type === "success" || event.type === "failure" || event.type === "unavailable";
}

export const LOGIN_TIMEOUT_MS = 5 * 60_000;

const PASTE_PROMPT =
  "Paste the authorization code, or the whole address your browser was sent to after logging in:";

export interface LoginFlowsDeps {
  /** The provider of the configured model: the one whose login the key source uses. */
  provider: string;
  /** Where a completed login is saved; undefined when config.toml has no `authFile`. */
  keys: { save(provider: string, credentials: OAuthCredentials): Promise<void> } | undefined;
  logger: Logger;
  timeoutMs?: number;
}

type Listener = (event: LoginEvent) => void;

interface PendingPrompt {
  event: Extract<LoginEvent, { type: "prompt" }>;
  resolve(value: string): void;
  reject(error: Error): void;
}

/** One run of a provider's `login()`, with what a late page needs to catch up. */
class Flow {
  readonly listeners = new Set<Listener>();
  readonly controller = new AbortController();
  private start: LoginEvent | undefined;
  private auth: LoginEvent | undefined;
  private progress: LoginEvent | undefined;
  prompt: PendingPrompt | undefined;
  end: LoginEvent | undefined;

  emit(event: LoginEvent): void {
    if (this.end) return;
    if (event.type === "start") this.start = event;
    else if (event.type === "auth") this.auth = event;
    else if (event.type === "progress") this.progress = event;
    else if (endsLogin(event)) this.end = event;
    for (const listener of this.listeners) listener(event);
  }

  /** The latest state: who, where to log in, the last progress, an open question, the end. */
  snapshot(): LoginEvent[] {
    const events = [this.start, this.auth, this.progress, this.prompt?.event, this.end];
    return events.filter((event): event is LoginEvent => event !== undefined);
  }
}

/**
 * Drives pi-ai's OAuth login of the configured provider for the login page, one flow at a time:
 * a page that connects while one runs follows it (and first gets its state so far), otherwise a
 * new one starts. The provider's questions (a pasted code or redirect address) wait for
 * `respond`. A flow that has not finished after the timeout is aborted. A completed login is
 * saved to `authFile`, where the key source finds it at the next request.
 */
export class LoginFlows {
  private flow: Flow | undefined;
  private readonly timeoutMs: number;

  constructor(private readonly deps: LoginFlowsDeps) {
    this.timeoutMs = deps.timeoutMs ?? LOGIN_TIMEOUT_MS;
  }

  /**
   * Follows the running flow, or starts one. The listener gets the state so far at once, then every
   * event until the flow ends. Returns a function that stops following (the flow goes on).
   */
  follow(listener: Listener): () => void {
    const flow = this.flow ?? this.begin();
    for (const event of flow.snapshot()) listener(event);
    if (!flow.end) flow.listeners.add(listener);
    return () => void flow.listeners.delete(listener);
  }

  /** Answers the open question of the running flow. */
  respond(value: string): void {
    const prompt = this.flow?.prompt;
    if (!this.flow || !prompt) throw new DomainError("conflict", "No pending prompt");
    if (value.trim() === "" && !prompt.event.allowEmpty)
      throw new DomainError("invalid", "An answer is needed");
    this.flow.prompt = undefined;
    prompt.resolve(value);
  }

  /** Ends the running flow (the app is stopping). */
  close(): void {
    if (this.flow) this.finish(this.flow, { type: "failure", message: "The assistant is stopping." });
  }

  private begin(): Flow {
    const flow = new Flow();
    this.flow = flow;
    void this.run(flow);
    return flow;
  }

  private async run(flow: Flow): Promise<void> {
    const { provider, keys, logger } = this.deps;
    const oauth = getOAuthProvider(provider);
    if (!keys) {
      return this.finish(flow, {
        type: "unavailable",
        message:
          'Signing in with a subscription is not set up: it needs authFile in config.toml, the file the login is kept in (for example authFile = "data/main/auth.json"). Add it, restart, and come back here. With an API key or a local model, there is nothing to do here.',
      });
    }
    if (!oauth) {
      return this.finish(flow, {
        type: "unavailable",
        message: `There is no subscription login for the provider "${provider}": it takes an API key (apiKey in config.toml, or the Settings page).`,
      });
    }
    flow.emit({ type: "start", provider, name: oauth.name });
    logger.info("login started", { provider });
    const timer = setTimeout(
      () =>
        this.finish(flow, {
          type: "failure",
          message: `The login was not completed within ${duration(this.timeoutMs)}. Reload the page to start again.`,
        }),
      this.timeoutMs,
    );
    timer.unref();
    try {
      const credentials = await oauth.login({
        onAuth: ({ url, instructions }) =>
          flow.emit({ type: "auth", url, ...(instructions ? { instructions } : {}) }),
        onPrompt: (prompt) => this.ask(flow, prompt),
        onManualCodeInput: () => this.ask(flow, { message: PASTE_PROMPT }),
        onProgress: (message) => flow.emit({ type: "progress", message }),
        // A page cannot offer a terminal's choices: take the browser login where there is one.
        onSelect: async ({ options }) =>
          (options.find((option) => option.id === "browser") ?? options[0])?.id,
        signal: flow.controller.signal,
      });
      if (flow.end) return;
      if (!isCredentials(credentials)) throw new Error("the provider's answer held no tokens");
      await keys.save(provider, credentials);
      logger.info("login completed", { provider });
      this.finish(flow, { type: "success", provider, name: oauth.name });
    } catch (error) {
      if (!flow.end) logger.warn("login failed", { provider, error: brief(error) });
      this.finish(flow, { type: "failure", message: `The login failed: ${brief(error)}` });
    } finally {
      clearTimeout(timer);
    }
  }

  private ask(flow: Flow, prompt: OAuthPrompt): Promise<string> {
    if (flow.end) return Promise.reject(new Error("the login has ended"));
    flow.prompt?.reject(new Error("a newer question replaced this one"));
    return new Promise((resolve, reject) => {
      flow.prompt = {
        event: {
          type: "prompt",
          message: prompt.message,
          ...(prompt.placeholder ? { placeholder: prompt.placeholder } : {}),
          allowEmpty: prompt.allowEmpty ?? false,
        },
        resolve,
        reject,
      };
      flow.emit(flow.prompt.event);
    });
  }

  private finish(flow: Flow, event: LoginEvent): void {
    if (flow.end) return;
    flow.emit(event);
    flow.listeners.clear();
    if (this.flow === flow) this.flow = undefined;
    // Unblocks a provider still waiting for an answer or polling, so its callback server closes.
    flow.controller.abort();
    const prompt = flow.prompt;
    flow.prompt = undefined;
    prompt?.reject(new Error("the login has ended"));
  }
}

function duration(ms: number): string {
  const [count, unit] = ms >= 60_000 ? [Math.round(ms / 60_000), "minute"] : [Math.ceil(ms / 1000), "second"];
  return `${count} ${unit}${count === 1 ? "" : "s"}`;
}
