import {
  PLUGIN_NAME_PATTERN,
  ServiceError,
  errorBodyText,
  errorMessage,
  runToolResponseSchema,
} from "@stavrobot/common";
import type { Attachment, ServiceClient } from "@stavrobot/common";
import { describePluginRun } from "./result.js";

/**
 * What the owner's `/prompt` comes to: an answer sent straight back, or the prompt's text as their
 * message, with the files its messages hold (saved like a plugin's output files) attached.
 */
export type PromptCommandResult =
  | { kind: "answer"; text: string }
  | {
      kind: "request";
      text: string;
      attachments: Attachment[];
      /** Who wrote the words: "mcp:<server> prompt <name>". */
      origin: string;
    };

export const PROMPT_USAGE =
  'Usage: /prompt <server> <prompt> key=value … (a value with spaces in double quotes: topic="sea tides").';

/** How long the owner waits for a server's prompt (its `timeoutSeconds` is at most 80). */
const PROMPT_TIMEOUT_MS = 90_000;

/**
 * The owner's `/prompt <server> <name> key=value …`: the MCP server's prompt (`prompts/get` on the
 * runner, features.ts there) becomes the owner's message, so the model answers it as theirs;
 * `/prompt <server>` answers with its prompts. The intake calls it only for the owner's own
 * messages (`queue/intake.ts`).
 */
export class PromptCommands {
  /** `filesDir`: the owner's files, where a prompt's files are kept (`plugin_output/<server>/`). */
  constructor(
    private readonly pluginRunner: ServiceClient,
    private readonly filesDir: string,
  ) {}

  /** Undefined when `text` is not a `/prompt` command. */
  async command(text: string | undefined): Promise<PromptCommandResult | undefined> {
    const match = /^\/prompt(?:\s+([\s\S]*))?$/i.exec(text?.trim() ?? "");
    if (!match) return undefined;
    const parsed = parsePromptCommand(match[1] ?? "");
    if ("error" in parsed) return answer(parsed.error);
    const { server, name, args } = parsed;
    // `/prompt <server>` alone: which prompts it has.
    if (name === undefined) {
      const listed = await this.run(server, "prompts/list", {});
      return "answer" in listed ? answer(listed.answer) : answer(`${listed.text}\n${PROMPT_USAGE}`);
    }
    const got = await this.run(server, "prompts/get", { name, arguments: args });
    if ("answer" in got) return answer(got.answer);
    if (!got.text.trim()) return answer(`Prompt "${name}" of "${server}" is empty.`);
    return {
      kind: "request",
      text: got.text,
      attachments: got.attachments,
      origin: `mcp:${server} prompt ${name}`,
    };
  }

  /** One of the server's prompt tools on the runner: its text and saved files, or what to answer. */
  private async run(
    server: string,
    tool: "prompts/list" | "prompts/get",
    body: Record<string, unknown>,
  ): Promise<{ text: string; attachments: Attachment[] } | { answer: string }> {
    let data;
    try {
      ({ data } = await this.pluginRunner.request(
        "POST",
        `/bundles/${server}/tools/${encodeURIComponent(tool)}/run`,
        { body, schema: runToolResponseSchema, timeoutMs: PROMPT_TIMEOUT_MS },
      ));
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      const said = errorBodyText(error.body) ?? "";
      if (error.status === 404 && said.startsWith("Bundle not found"))
        return { answer: `No MCP server "${server}" is declared.` };
      if (error.status === 404) return { answer: `"${server}" offers no prompts.` };
      if (error.status === 403)
        return {
          answer: `The prompts of "${server}" are switched off in its permissions (the Plugins page).`,
        };
      if (error.status === undefined)
        return { answer: `The plugin runner is unreachable: ${errorMessage(error)}` };
      return { answer: `The prompt could not be fetched: ${said || errorMessage(error)}` };
    }
    if ("status" in data)
      return { answer: "The prompt could not be fetched: the runner started it in the background." };
    if (!data.success) return { answer: `The prompt could not be fetched: ${data.error}` };
    const text = typeof data.output === "string" ? data.output : JSON.stringify(data.output);
    // Its images and other files are saved where a plugin's are, and come with the message.
    const attachments = data.files?.length
      ? (await describePluginRun({ plugin: server, tool, outcome: data, filesDir: this.filesDir })).files
      : [];
    return { text, attachments };
  }
}

function answer(text: string): PromptCommandResult {
  return { kind: "answer", text };
}

/**
 * `<server> <name> key=value …` (or `<server>` alone, to list its prompts): words split at spaces; a double-quoted part keeps its spaces
 * (`topic="sea tides"`, `\"` and `\\` inside quotes); each argument once.
 */
export function parsePromptCommand(
  rest: string,
): { server: string; name: string | undefined; args: Record<string, string> } | { error: string } {
  const words = splitWords(rest);
  if ("error" in words) return words;
  const [server, name, ...pairs] = words.words;
  if (!server) return { error: PROMPT_USAGE };
  if (!PLUGIN_NAME_PATTERN.test(server)) return { error: `No MCP server "${server}" is declared.` };
  const args: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    if (at <= 0) return { error: `"${pair}" is not key=value. ${PROMPT_USAGE}` };
    const key = pair.slice(0, at);
    if (key in args) return { error: `The argument "${key}" is given twice.` };
    args[key] = pair.slice(at + 1);
  }
  return { server, name, args };
}

/** Words split at spaces; a double-quoted part keeps its spaces (`\"` and `\\` inside quotes). */
export function splitWords(text: string): { words: string[] } | { error: string } {
  const words: string[] = [];
  let word: string | undefined;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (quoted) {
      if (char === "\\" && (text[i + 1] === '"' || text[i + 1] === "\\")) word += text[++i]!;
      else if (char === '"') quoted = false;
      else word += char;
    } else if (/\s/.test(char)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (char === '"') {
      quoted = true;
      word ??= "";
    } else word = (word ?? "") + char;
  }
  if (quoted) return { error: `A double quote is not closed. ${PROMPT_USAGE}` };
  if (word !== undefined) words.push(word);
  return { words };
}
