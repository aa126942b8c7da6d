import { sanitizeDeep, sanitizeText, toSafeFilename } from "@stavrobot/common";
import type { TransportedFile } from "@stavrobot/common";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { RunOutcome } from "../chat-messages.js";
import { schemaProblems } from "../formats/json-schema.js";
import type { Redactor } from "./redact.js";

const EXTENSIONS: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/svg+xml": "svg",
  "audio/wav": "wav",
  "audio/mpeg": "mp3",
  "audio/ogg": "ogg",
  "application/pdf": "pdf",
  "application/json": "json",
  "text/plain": "txt",
};

/**
 * An MCP `tools/call` result as a run's outcome, the way plugin output is everywhere else:
 * - text blocks are the text the model reads, one after another;
 * - images and audio become output files (the app saves them and shows images to the model), and
 *   the text says which file each one is;
 * - an embedded resource is its text (headed by its URI), or a file when it is binary; a resource
 *   link is a line naming it;
 * - `structuredContent` is kept beside the text (the app shows structured output readably);
 * - `isError` makes the run a failure carrying the text.
 * Secret values are removed from everything.
 */
export function callOutcome(tool: string, result: Record<string, unknown>, redact: Redactor): RunOutcome {
  const parts: string[] = [];
  const files: TransportedFile[] = [];
  const content = Array.isArray(result.content) ? result.content : [];
  const addFile = (data: string, mimeType: string, hint?: string): string => {
    const extension = EXTENSIONS[mimeType.split(";")[0]!.trim().toLowerCase()] ?? "bin";
    const base = hint ? toSafeFilename(hint.split("/").pop() ?? hint, "") : "";
    const filename =
      base && base.includes(".")
        ? base
        : `${toSafeFilename(tool, "result")}-${files.length + 1}.${extension}`;
    files.push({ filename, data });
    return filename;
  };
  for (const item of content) {
    if (!item || typeof item !== "object") continue;
    const block = item as Record<string, unknown>;
    const mimeType = typeof block.mimeType === "string" ? block.mimeType : "application/octet-stream";
    if (block.type === "text" && typeof block.text === "string") parts.push(block.text);
    else if ((block.type === "image" || block.type === "audio") && typeof block.data === "string") {
      parts.push(`[${block.type} ${mimeType}: output file ${addFile(block.data, mimeType)}]`);
    } else if (block.type === "resource" && block.resource && typeof block.resource === "object") {
      const resource = block.resource as Record<string, unknown>;
      const uri = typeof resource.uri === "string" ? resource.uri : "(no uri)";
      const type = typeof resource.mimeType === "string" ? resource.mimeType : "application/octet-stream";
      if (typeof resource.text === "string") parts.push(`[resource ${uri}]\n${resource.text}`);
      else if (typeof resource.blob === "string")
        parts.push(`[resource ${uri} (${type}): output file ${addFile(resource.blob, type, uri)}]`);
    } else if (block.type === "resource_link" && typeof block.uri === "string") {
      const name = typeof block.name === "string" ? `${block.name} ` : "";
      const about = typeof block.description === "string" ? `: ${block.description}` : "";
      parts.push(`[resource link ${name}${block.uri}${about}]`);
    } else {
      parts.push(JSON.stringify(block));
    }
  }
  const text = sanitizeText(redact.text(parts.join("\n")));
  if (result.isError === true) {
    return { success: false, error: text || `Tool "${tool}" reported an error without saying what.` };
  }
  const structured = result.structuredContent;
  const output =
    structured && typeof structured === "object"
      ? { content: text, structuredContent: sanitizeDeep(redact.deep(structured)) }
      : text;
  return { success: true, output, ...(files.length > 0 ? { files } : {}) };
}

/**
 * Why a result does not keep the `outputSchema` its tool declared (no structured content, or
 * content the schema refuses), checked with the runner's ajv (json-schema.ts); an error result
 * is not checked. `named` is how the message names the tool and its server.
 */
export async function outputMismatch(
  named: string,
  tool: Pick<Tool, "outputSchema"> | undefined,
  result: CallToolResult,
): Promise<string | undefined> {
  const schema = tool?.outputSchema;
  if (!schema || result.isError === true) return undefined;
  const structured = result.structuredContent;
  if (!structured || typeof structured !== "object")
    return `${named} declares an output schema but returned no structured content.`;
  const problems = await schemaProblems(schema, structured);
  return problems
    ? `${named} returned structured content that does not match its output schema: ${problems}`
    : undefined;
}
