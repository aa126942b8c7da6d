import { ModelCallError } from "../model/one-shot.js";
import type { AgentTool, AgentToolResult } from "@mariozechner/pi-agent-core";

/**
 * Tool results are plain text for the model. Failures the model should read and recover from
 * are thrown as ToolError (pi-agent-core turns a thrown error into an `isError` tool result).
 */
export function textResult(text: string, details: Record<string, unknown> = {}): AgentToolResult<unknown> {
  return { content: [{ type: "text", text }], details };
}

/**
 * A result's details saying it holds stored outside text and where it came from (a labelled note,
 * a contact's file, a search's hits in a contact's turn): the trust gate marks the turn
 * (trust/gate.ts, `observe`). Nothing when `origin` is undefined.
 */
export function outsideDetails(origin: string | null | undefined): Record<string, unknown> {
  return origin ? { outside: origin } : {};
}

export { ToolError } from "../tool-error.js";
import { ToolError } from "../tool-error.js";

/**
 * A model call's failure as the tool's error (`ModelCallError` carries words for the model); other
 * errors (an abort) pass unchanged.
 */
export function asToolError(error: unknown): never {
  if (error instanceof ModelCallError) throw new ToolError(error.message);
  throw error;
}

/**
 * Rewrites one tool's call arguments before the call is stored (e.g. to hide secrets) and names
 * the secret strings it hid, so that they can be scrubbed from the call's result too (a
 * validation error quotes the arguments it received). The turn applies it (`agent/redact.ts`).
 */
export type ArgumentRedactor = (args: Record<string, unknown>) => {
  args: Record<string, unknown>;
  secrets: string[];
};

/** What a redacted value is stored as. */
export const REDACTED = "[redacted]";

/** Builds the text returned for a `help` action or an unknown action. */
export function unknownAction(action: string, valid: readonly string[]): ToolError {
  return new ToolError(`Unknown action '${action}'. Valid actions: ${valid.join(", ")}.`);
}

/**
 * A tool of any parameter schema. pi-agent-core itself types its tool list this way: each tool's
 * parameters are checked against its own schema at run time.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyAgentTool = AgentTool<any>;

export { RESULT_LIMIT_BYTES, capText } from "../cap.js";
