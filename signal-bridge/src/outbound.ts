import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger, SignalCliState, SignalSendRequest } from "@stavrobot/common";
import { DomainError, decodeBase64, SIGNAL_ATTACHMENT_LIMIT_BYTES, toSafeFilename } from "@stavrobot/common";
import { markdownToSignal } from "./format.js";
import { rateLimitOf, sendFailureOf } from "./send-results.js";
import type { RpcClient } from "./rpc.js";
import { RpcError, RpcUnreachableError } from "./rpc.js";

export interface OutboundDeps {
  rpc: RpcClient;
  /** signal-cli's state, and why it does not run (what to do) when it does not. */
  daemon: { readonly state: SignalCliState; readonly problem: string | undefined };
  /** Private directory for attachments on their way out; emptied on start. */
  tempDir: string;
  logger: Logger;
}

/**
 * Sending through signal-cli: Markdown becomes Signal text styles, an attachment is written to a
 * private temporary directory for signal-cli to read and removed once the call returns. Failures
 * are DomainErrors: "unavailable" while signal-cli is not running, "rate-limited" when Signal
 * rate-limits the account (the challenge token is kept for `submitChallenge`), "upstream" for
 * anything else signal-cli reports.
 */
export class Outbound {
  private challengeToken: string | undefined;

  constructor(private readonly deps: OutboundDeps) {}

  /** Clears attachments a previous run left behind (it may have died mid-send). */
  async start(): Promise<void> {
    await rm(this.deps.tempDir, { recursive: true, force: true });
    await mkdir(this.deps.tempDir, { recursive: true, mode: 0o700 });
  }

  async send(request: SignalSendRequest): Promise<{ timestamp: number }> {
    this.requireRunning();
    const params: Record<string, unknown> = { recipient: [request.recipient] };
    if (request.message !== undefined && request.message.trim() !== "") {
      const { text, textStyle } = markdownToSignal(request.message);
      params.message = text;
      if (textStyle.length > 0) params.textStyle = textStyle;
    }
    let dir: string | undefined;
    try {
      if (request.attachment !== undefined) {
        const bytes = decodeBase64(request.attachment);
        if (!bytes) throw new DomainError("invalid", "Invalid request: attachment: must be base64");
        if (bytes.length > SIGNAL_ATTACHMENT_LIMIT_BYTES) {
          throw new DomainError("too-large", "The attachment is too large");
        }
        dir = await mkdtemp(join(this.deps.tempDir, "send-"));
        const path = join(
          dir,
          toSafeFilename(request.attachmentFilename ?? "attachment.bin", "attachment.bin"),
        );
        await writeFile(path, bytes, { mode: 0o600, flag: "wx" });
        params.attachments = [path];
      }
      const result = await this.call("send", params);
      const failure = sendFailureOf(result);
      if (failure) throw failure.kind === "rate-limit" ? this.rateLimited(failure) : failure.error;
      const timestamp = (result as { timestamp?: unknown } | undefined)?.timestamp;
      this.deps.logger.info("sent a Signal message", {
        to: request.recipient,
        attachment: dir !== undefined,
      });
      return { timestamp: typeof timestamp === "number" ? timestamp : Date.now() };
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  }

  /** Answers the pending rate-limit challenge with a solved captcha; invalid when none is pending. */
  async submitChallenge(captcha: string): Promise<void> {
    const challenge = this.challengeToken;
    if (!challenge) throw new DomainError("invalid", "No rate-limit challenge is pending");
    this.requireRunning();
    await this.call("submitRateLimitChallenge", { challenge, captcha });
    if (this.challengeToken === challenge) this.challengeToken = undefined;
    this.deps.logger.info("rate-limit challenge accepted");
  }

  private requireRunning(): void {
    const { state, problem } = this.deps.daemon;
    if (state !== "running") {
      throw new DomainError("unavailable", problem ?? `signal-cli is not running (${state})`);
    }
  }

  /** One JSON-RPC call, its failures as DomainErrors (a rate limit among them). */
  private async call(method: string, params: Record<string, unknown>): Promise<unknown> {
    try {
      return await this.deps.rpc.call(method, params);
    } catch (error) {
      if (error instanceof RpcUnreachableError) {
        if (error.refused) {
          throw new DomainError("unavailable", this.deps.daemon.problem ?? "signal-cli is not running");
        }
        throw new DomainError("upstream", error.message);
      }
      if (!(error instanceof RpcError)) throw error;
      const limit = rateLimitOf(error.data, error.code);
      if (limit) throw this.rateLimited(limit);
      this.deps.logger.warn("signal-cli refused a call", { method, code: error.code, error: error.message });
      throw new DomainError("upstream", `signal-cli: ${error.message}`);
    }
  }

  private rateLimited(limit: { retryAfterSeconds: number; token: string | undefined }): DomainError {
    if (limit.token) this.challengeToken = limit.token;
    this.deps.logger.warn("Signal rate-limited a send", {
      retryAfterSeconds: limit.retryAfterSeconds,
      challenge: limit.token !== undefined,
    });
    // The HTTP layer adds `Retry-After` from `retryAfterSeconds`.
    return new DomainError("rate-limited", "rate_limited", {
      retryAfterSeconds: limit.retryAfterSeconds,
      ...(limit.token ? { challengeToken: limit.token } : {}),
    });
  }
}
