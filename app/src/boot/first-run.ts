/**
 * The first `npm start` in a terminal: it writes config.toml with a generated password, says
 * where the assistant is and what the password is, says plainly that it cannot answer until a
 * model provider is set, and offers to set one: a provider and its key, or a local model's
 * address. The choice is checked with one free call to the provider before it is written (the
 * Settings page's check). Without a terminal the start is as it always was: the app writes the
 * file and logs that a key is missing.
 */
import { createInterface } from "node:readline";
import { Writable } from "node:stream";
import { readFileSync } from "node:fs";
import { DomainError } from "@stavrobot/common";
import { ensureConfigFile } from "./config.js";
import { writeConfigFile } from "./config-edit.js";
import { checkProviderChoice, type ProviderChoice } from "./provider-choice.js";

export interface FirstRunOptions {
  configPath: string;
  examplePath: string;
  /** Where the owner opens the assistant, e.g. http://localhost:3000. */
  address: string;
  input: NodeJS.ReadableStream;
  output: NodeJS.WritableStream & { isTTY?: boolean };
}

/** Whether this start may ask: a person at a terminal, not CI, and no config.toml yet. */
export function mayAskFirstRun(
  env: NodeJS.ProcessEnv,
  streams: { stdin: { isTTY?: boolean }; stdout: { isTTY?: boolean } },
  configExists: boolean,
): boolean {
  return !configExists && Boolean(streams.stdin.isTTY && streams.stdout.isTTY) && !env.CI;
}

/**
 * Writes config.toml (a generated password), tells the owner the address and the password, and
 * asks for a provider until one is accepted or they skip. Returns whether a provider was set.
 */
export async function runFirstRun(options: FirstRunOptions): Promise<boolean> {
  const password = ensureConfigFile(options.configPath, options.examplePath);
  const say = (text = "") => options.output.write(`${text}\n`);
  say();
  say("Welcome to Stavrobot. This is its first start.");
  say(`  Address:  ${options.address}`);
  if (password) say(`  Password: ${password}   (any user name; it is in ${options.configPath})`);
  say();
  say("The assistant cannot answer until a model provider is set: a provider's API key, or a local");
  say("model's address. You can set it now, or later on the Settings page or in config.toml.");
  const prompt = new Prompt(options);
  try {
    for (;;) {
      const choice = await askChoice(prompt, say);
      if (!choice) {
        say("Skipped: the assistant starts, but answers only once a provider is set (Settings page).");
        return false;
      }
      say("Checking with the provider…");
      try {
        const text = readFileSync(options.configPath, "utf8");
        const checked = await checkProviderChoice(text, choice, options.configPath);
        writeConfigFile(options.configPath, checked.text);
        say(`OK: ${checked.check.detail}. Written to ${options.configPath}.`);
        return true;
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        say(`That did not work: ${error.message}`);
        const fix = error.details?.fix;
        if (typeof fix === "string") say(`  ${fix}`);
        const again = await prompt.ask("Try again? [Y/n] ");
        if (again === undefined || /^n/i.test(again)) {
          say("Skipped: the assistant starts, but answers only once a provider is set (Settings page).");
          return false;
        }
      }
    }
  } finally {
    prompt.close();
    say();
  }
}

/** One round of questions; undefined when the owner skips (an empty answer, or the end of input). */
async function askChoice(prompt: Prompt, say: (text?: string) => void): Promise<ProviderChoice | undefined> {
  say();
  say("  1) Anthropic (Claude), with an API key");
  say("  2) another provider (openai, google, openrouter, groq, mistral, xai…), with an API key");
  say("  3) a local model or a server of your own (Ollama, llama.cpp, vLLM, LM Studio, a proxy)");
  const which = await prompt.ask("Which one? [1/2/3, Enter to skip] ");
  if (!which) return undefined;
  if (which === "1") {
    const apiKey = await prompt.ask("Anthropic API key (sk-ant-…): ", { secret: true });
    if (!apiKey) return undefined;
    const model = (await prompt.ask("Model [claude-sonnet-4-5]: ")) || "claude-sonnet-4-5";
    return { provider: "anthropic", model, apiKey };
  }
  if (which === "2") {
    const provider = await prompt.ask("Provider id (as pi-ai names it, e.g. openai): ");
    if (!provider) return undefined;
    const model = await prompt.ask("Model id (e.g. gpt-4.1): ");
    if (!model) return undefined;
    const apiKey = await prompt.ask(`${provider} API key: `, { secret: true });
    if (!apiKey) return undefined;
    return { provider, model, apiKey };
  }
  if (which === "3") {
    const baseUrl =
      (await prompt.ask("Server address [http://localhost:11434/v1, Ollama's]: ")) ||
      "http://localhost:11434/v1";
    const anthropic = /^a/i.test(
      (await prompt.ask("Does it speak OpenAI's API or Anthropic's? [O/a] ")) ?? "",
    );
    const model = await prompt.ask("Model id as the server names it (e.g. llama3.1:8b): ");
    if (!model) return undefined;
    const apiKey = await prompt.ask("API key (Enter for none): ", { secret: true });
    return {
      provider: "local",
      model,
      baseUrl,
      api: anthropic ? "anthropic-messages" : "openai-completions",
      ...(apiKey ? { apiKey } : {}),
    };
  }
  say(`"${which}" is not one of 1, 2 or 3.`);
  return askChoice(prompt, say);
}

/** Questions over a line reader; a secret answer is not echoed to a terminal. */
class Prompt {
  private readonly lines: AsyncIterator<string>;
  private readonly output: NodeJS.WritableStream;
  private readonly close_: () => void;
  private muted = false;

  constructor(options: Pick<FirstRunOptions, "input" | "output">) {
    const { output } = options;
    const echo = new Writable({
      write: (chunk, _encoding, done) => {
        if (!this.muted) output.write(chunk);
        done();
      },
    });
    const reader = createInterface({ input: options.input, output: echo, terminal: Boolean(output.isTTY) });
    this.lines = reader[Symbol.asyncIterator]();
    this.close_ = () => reader.close();
    this.output = output;
  }

  /** The trimmed answer, or undefined at the end of input. */
  async ask(question: string, options: { secret?: boolean } = {}): Promise<string | undefined> {
    this.output.write(question);
    this.muted = options.secret === true;
    try {
      const next = await this.lines.next();
      return next.done ? undefined : next.value.trim();
    } finally {
      if (this.muted) this.output.write("\n");
      this.muted = false;
    }
  }

  close(): void {
    this.close_();
  }
}
