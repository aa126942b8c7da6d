import {
  QUESTION_ID_PATTERN,
  ServiceError,
  errorBodyText,
  errorMessage,
  questionAnswerResponseSchema,
} from "@stavrobot/common";
import type { OwnerQuestion, QuestionAnswer, ServiceClient } from "@stavrobot/common";
import { splitWords } from "./prompt-command.js";

const COMMAND = /^\/(answer|decline|cancel)(?:\s+([\s\S]*))?$/i;
export const QUESTION_USAGE =
  'Usage: /answer <question> key=value … (a value with spaces in double quotes: note="by the window"), /decline <question> or /cancel <question>.';

/**
 * An MCP server's questions to the owner (elicitation, the runner's `mcp/elicitation.ts`): the
 * runner words each one and the app tells the owner, on their channel and in the web admin's
 * notifications, whoever's turn the server's tool ran in (a contact's agent never sees it). The
 * owner answers with `/answer <id> key=value …`, `/decline <id>` or `/cancel <id>`, taken by the
 * intake from the owner alone and handed back to the runner, which checks the answer against the
 * server's form.
 */
export class QuestionCommands {
  constructor(
    private readonly deps: {
      pluginRunner: ServiceClient;
      /** Tells the owner (their channel when they have one, and the web admin's notifications). */
      tellOwner: (text: string, key: string) => Promise<void>;
    },
  ) {}

  /** The runner's `POST /questions`: put to the owner. */
  async tell(question: OwnerQuestion): Promise<void> {
    await this.deps.tellOwner(question.text, `question:${question.plugin}:${question.id}`);
  }

  /** The owner's answer: what to tell them, or undefined when `text` is not one of the commands. */
  async command(text: string | undefined): Promise<string | undefined> {
    const match = COMMAND.exec(text?.trim() ?? "");
    if (!match) return undefined;
    const action = match[1]!.toLowerCase();
    const words = splitWords(match[2] ?? "");
    if ("error" in words) return `${words.error.replace(/ Usage:.*$/, "")} ${QUESTION_USAGE}`;
    const [id, ...pairs] = words.words;
    if (!id || !QUESTION_ID_PATTERN.test(id.toLowerCase())) return QUESTION_USAGE;
    if (action !== "answer" && pairs.length > 0)
      return `"/${action}" takes only the question's id. ${QUESTION_USAGE}`;
    const values: Record<string, string> = {};
    for (const pair of pairs) {
      const at = pair.indexOf("=");
      if (at <= 0) return `"${pair}" is not key=value. ${QUESTION_USAGE}`;
      const key = pair.slice(0, at);
      if (key in values) return `"${key}" is given twice.`;
      values[key] = pair.slice(at + 1);
    }
    const body: QuestionAnswer =
      action === "answer" ? { action: "accept", values } : { action: action as "decline" | "cancel" };
    try {
      const { data } = await this.deps.pluginRunner.request("POST", `/questions/${id.toLowerCase()}`, {
        body,
        schema: questionAnswerResponseSchema,
        timeoutMs: 10_000,
        // Never twice: a repeat would find the question answered and say so.
        retries: 0,
      });
      return data.message;
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      if (error.status === undefined) return `The plugin runner is unreachable: ${errorMessage(error)}`;
      return errorBodyText(error.body) ?? `The answer was not taken: ${errorMessage(error)}`;
    }
  }
}
