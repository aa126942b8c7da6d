import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { ElicitRequestFormParams, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import { CallClock, formFields } from "./elicitation.js";
import type { OwnerQuestions } from "./elicitation.js";
import type { Redactor } from "./redact.js";

/** A call of one of the server's tools in flight: its tool and its clock (which a question pauses). */
interface CallInFlight {
  tool: string;
  clock: CallClock;
}

export interface CallsOptions {
  /** The server's name. */
  server: string;
  /** How long the owner may take, in all, to answer its questions during one call. */
  questionTimeoutMs: number;
  redact: Redactor;
  logger: Logger;
  /** Where its questions go: to the owner, through the app (absent: every question is cancelled). */
  questions?: OwnerQuestions;
}

/**
 * One MCP server's tool calls in flight, each under a clock of its own, and the questions the
 * server asks meanwhile (elicitation): a question pauses the clocks of the calls it is asked
 * during, and is put to the owner only while a call waits for it.
 */
export class CallsInFlight {
  private readonly calls = new Set<CallInFlight>();

  constructor(private readonly options: CallsOptions) {}

  /**
   * Runs one call of a server's tool under a clock of its own: past `timeoutMs` (not counting the
   * time a question of the server waits for the owner) the call is cancelled as the SDK's own
   * timeout would (notifications/cancelled, RequestTimeout). When the last call ends, a question
   * still waiting is cancelled: nobody waits for its answer any more.
   */
  async timed<T>(tool: string, timeoutMs: number, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const abort = new AbortController();
    const clock = new CallClock(timeoutMs, this.options.questionTimeoutMs, () =>
      abort.abort(new McpError(ErrorCode.RequestTimeout, "Request timed out")),
    );
    const inFlight = { tool, clock };
    this.calls.add(inFlight);
    try {
      return await call(abort.signal);
    } finally {
      clock.stop();
      this.calls.delete(inFlight);
      if (this.calls.size === 0) this.options.questions?.withdraw(this.options.server);
    }
  }

  /**
   * A question of the server (elicitation, form mode): put to the owner while one of its calls
   * runs, the calls' clocks paused meanwhile, for at most what is left of their time for
   * questions. Outside a call nobody waits for it: it is cancelled without troubling the owner.
   */
  async ask(params: ElicitRequestFormParams, signal: AbortSignal): Promise<ElicitResult> {
    const questions = this.options.questions;
    const calls = [...this.calls];
    const limitMs = Math.min(
      this.options.questionTimeoutMs,
      ...calls.map((call) => call.clock.questionTimeLeft()),
    );
    if (!questions || calls.length === 0 || limitMs <= 0) {
      this.options.logger.info(
        "an MCP server's question was cancelled: no call of it waits, or their time for questions is spent",
        {
          server: this.options.server,
        },
      );
      return { action: "cancel" };
    }
    let fields;
    try {
      fields = formFields(params.requestedSchema);
    } catch (error) {
      // The SDK's checks let through only the spec's field kinds; this is for what slips past.
      throw new McpError(
        ErrorCode.InvalidParams,
        `The owner is asked only flat forms: ${errorMessage(error)}`,
      );
    }
    const redacted = fields.map((field) => ({
      ...field,
      ...(field.title ? { title: this.options.redact.text(field.title) } : {}),
      ...(field.description ? { description: this.options.redact.text(field.description) } : {}),
    }));
    for (const call of calls) call.clock.pause();
    try {
      return await questions.ask({
        server: this.options.server,
        message: this.options.redact.text(params.message),
        fields: redacted,
        during: [...new Set(calls.map((call) => call.tool))],
        limitMs,
        signal,
      });
    } finally {
      for (const call of calls) call.clock.resume();
    }
  }
}
