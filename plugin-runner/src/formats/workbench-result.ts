import { sanitizeDeep, sanitizeText } from "@stavrobot/common";
import type { RunOutcome } from "../chat-messages.js";

/** Workbench's `ToolResponse`: what every tool result becomes. */
export interface ToolResponse {
  content: string | unknown[];
  metadata?: Record<string, unknown>;
  error?: string;
}

/** String content longer than this is cut and flagged `metadata.truncated`, as Workbench does. */
export const MAX_CONTENT_CHARS = 500_000;

/**
 * What a Workbench tool returned, normalised as Workbench does: an object with `content` passes
 * as it is; a string becomes `{content}`; an object with a truthy `error` becomes an error
 * response (`content` its `message` or `error`, the object as metadata); anything else becomes its
 * JSON text, with the object as metadata. Long string content is cut and flagged.
 */
export function normaliseToolResponse(value: unknown): ToolResponse {
  let response: ToolResponse;
  if (typeof value === "string") response = { content: value };
  else if (value && typeof value === "object" && !Array.isArray(value) && "content" in value) {
    const record = value as Record<string, unknown>;
    response = {
      content: Array.isArray(record.content) ? record.content : text(record.content),
      ...(isRecord(record.metadata) ? { metadata: record.metadata } : {}),
      ...(record.error !== undefined && record.error !== null && record.error !== false
        ? { error: text(record.error) }
        : {}),
    };
  } else if (isRecord(value) && value.error) {
    const message = value.message || value.error;
    response = { content: text(message), error: text(value.error), metadata: value };
  } else {
    response = {
      content: JSON.stringify(value ?? null, null, 2),
      ...(isRecord(value) ? { metadata: value } : {}),
    };
  }
  if (typeof response.content === "string" && response.content.length > MAX_CONTENT_CHARS) {
    response = {
      ...response,
      content: response.content.slice(0, MAX_CONTENT_CHARS),
      metadata: { ...response.metadata, truncated: true, originalLength: response.content.length },
    };
  }
  return response;
}

/** A tool that threw: Workbench's `Tool error: …` response. */
export function thrownResponse(message: string): ToolResponse {
  return { content: `Tool error: ${message}`, error: message };
}

/**
 * The response as a run's outcome: its content as text (an MCP-style array's text blocks joined by
 * lines; other blocks as JSON), with its metadata beside it when it has any; an error response is
 * a failed run carrying its content (and the error's own text when it says more).
 */
export function responseOutcome(response: ToolResponse): RunOutcome {
  const content = sanitizeText(contentText(response.content));
  if (response.error !== undefined) {
    const detail = sanitizeText(response.error);
    return { success: false, error: detail && !content.includes(detail) ? `${content}\n${detail}` : content };
  }
  const truncated = response.metadata?.truncated === true;
  const output = response.metadata ? { content, metadata: sanitizeDeep(response.metadata) } : content;
  return {
    success: true,
    output,
    ...(truncated
      ? { warnings: [`Output truncated: the tool returned more than ${MAX_CONTENT_CHARS} characters.`] }
      : {}),
  };
}

function contentText(content: string | unknown[]): string {
  if (typeof content === "string") return content;
  return content
    .map((block) =>
      isRecord(block) && block.type === "text" && typeof block.text === "string"
        ? block.text
        : JSON.stringify(block),
    )
    .join("\n");
}

function text(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value ?? "");
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
