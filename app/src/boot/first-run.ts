/**
 * The first `npm start` in a terminal: it writes config.toml with a generated password, says
 * where the assistant is and what the password is, says plainly that it cannot answer until a
 * model provider is set, and offers to set one: a provider and its key, or a local model's
 * address. The choice is checked with the provider before it is written (the Settings page's
 * check): a refusal says why, and the owner tries again with each answer kept, saves it anyway, or
 * skips. Then it offers search by meaning (an embeddings endpoint, checked the same way; Enter
 * skips). Without a terminal the start is as it always was: the app writes the file and logs that a
 * key is missing.
 */
import { createInterface } from "node:readline";
import { Writable } from "node:stream";
import { readFileSync } from "node:fs";
import { ConfigError, DomainError } from "@stavrobot/common";
import { ensureConfigFile, parseConfig } from "./config.js";
import { setTableKeys, writeConfigFile } from "./config-edit.js";
import { embeddingsCheck } from "../doctor/embeddings.js";
import { createEmbeddingsClient } from "../embeddings/client.js";
import { knownProviders, unknownProviderMessage } from "../model/model.js";
import { closestNames, quotedList } from "../model/names.js";
import { checkProviderChoice, typedAddress, type ProviderChoice } from "./provider-choice.js";

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

/** What the owner answered, kept for a second try: each answer is offered again as the default. */
type Answers = ProviderChoice & { which: "1" | "2" | "3" };

const SKIPPED = "Skipped: the assistant starts, but answers only once a provider is set (Settings page).";

/**
 * Writes config.toml (a generated password), tells the owner the address and the password, and
 * asks for a provider until one is accepted, saved anyway, or skipped. Returns whether a provider
 * was set.
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
    const set = await providerRounds(prompt, say, options);
    await askEmbeddings(prompt, say, options.configPath);
    return set;
  } finally {
    prompt.close();
    say();
  }
}

/** The provider's questions until one is accepted, saved anyway, or skipped. */
async function providerRounds(
  prompt: Prompt,
  say: (text?: string) => void,
  options: FirstRunOptions,
): Promise<boolean> {
  let previous: Answers | undefined;
  for (;;) {
    const answers = await askChoice(prompt, say, previous);
    if (!answers) {
      say(SKIPPED);
      return false;
    }
    const { which: _which, ...choice } = answers;
    say("Checking with the provider…");
    let checked;
    try {
      const text = readFileSync(options.configPath, "utf8");
      // The check's outcome is shown before anything is written; saving anyway needs no second check.
      checked = await checkProviderChoice(text, { ...choice, saveAnyway: true }, options.configPath);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      say(`That did not work: ${error.message}`);
      const again = await prompt.ask("Try again (your answers are kept)? [Y/n] ");
      if (again === undefined || /^n/i.test(again)) {
        say(SKIPPED);
        return false;
      }
      previous = answers;
      continue;
    }
    for (const note of checked.notes) say(`  Note: ${note}.`);
    if (!checked.unchecked) {
      writeConfigFile(options.configPath, checked.text);
      say(`OK: ${checked.check.detail}. Written to ${options.configPath}.`);
      return true;
    }
    say(`That did not work: ${checked.check.detail}`);
    // A model the provider does not have: its closest name is offered in its place.
    const suggested = checked.check.reason === "unknown-model" ? checked.check.suggestions?.[0] : undefined;
    if (suggested) say(`  Trying again offers "${suggested}" at the model's question.`);
    else if (checked.check.fix) say(`  ${checked.check.fix}`);
    const next = await prompt.ask("Try again (your answers are kept), save it anyway, or skip? [T/s/n] ");
    if (next === undefined || /^n/i.test(next)) {
      say(SKIPPED);
      return false;
    }
    if (/^s/i.test(next)) {
      writeConfigFile(options.configPath, checked.text);
      say(`Saved as it is, unchecked: ${options.configPath}. Home and npm run doctor say how it fares.`);
      return true;
    }
    previous = { ...answers, model: suggested ?? answers.model };
  }
}

/**
 * Search by meaning, offered once the provider is settled: an embeddings endpoint's address,
 * model and key, checked with one small call (the doctor's) before `[embeddings]` is written. A
 * refusal says why and leaves it for the Settings page; Enter skips.
 */
async function askEmbeddings(
  prompt: Prompt,
  say: (text?: string) => void,
  configPath: string,
): Promise<void> {
  say();
  say("Optional: search by meaning. With an embeddings endpoint the assistant finds what was meant, not");
  say("only the words used, and recalls earlier conversations by themselves (Settings page, later too).");
  const typed = await prompt.ask(
    "Embeddings server address (OpenAI-compatible, e.g. https://api.openai.com/v1), or Enter to skip: ",
  );
  if (!typed) return;
  const baseUrl = /^https?:\/\//i.test(typed) ? typed : `http://${typed}`;
  const model = (await prompt.ask(withDefault("Embedding model", EMBEDDING_MODEL))) || EMBEDDING_MODEL;
  const key = await prompt.ask("Its API key (Enter for none, as local servers need): ", { secret: true });
  const text = setTableKeys(readFileSync(configPath, "utf8"), "embeddings", {
    baseUrl,
    model,
    apiKey: key || undefined,
  });
  let embeddings;
  try {
    embeddings = parseConfig(text, configPath).embeddings;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    say(`That did not work: ${error.message}. Search by meaning can be set on the Settings page.`);
    return;
  }
  say("Checking with the endpoint…");
  const check = await embeddingsCheck(
    embeddings ? { client: createEmbeddingsClient(embeddings) } : undefined,
  );
  if (check.state !== "ok") {
    say(`That did not work: ${check.detail}. Nothing was written; the Settings page can set it later.`);
    return;
  }
  writeConfigFile(configPath, text);
  say(`OK: ${check.detail.replace(/\.$/, "")}. Written to ${configPath}.`);
}

const EMBEDDING_MODEL = "text-embedding-3-small";

/** `question [default]: `, or `question: ` without one. */
const withDefault = (question: string, value: string | undefined): string =>
  value ? `${question} [${value}]: ` : `${question}: `;

/**
 * Asks for a key: Enter keeps the one typed before; where none is needed (`optional`), Enter is
 * none the first time, and a dash removes the one typed.
 */
async function askKey(prompt: Prompt, question: string, previous: string | undefined, optional: boolean) {
  const hint = previous
    ? ` [Enter keeps the one typed${optional ? '; "-" for none' : ""}]`
    : optional
      ? " (Enter for none)"
      : "";
  const typed = await prompt.ask(`${question}${hint}: `, { secret: true });
  if (typed === undefined) return undefined;
  if (optional && typed === "-") return "";
  return typed || previous || "";
}

/**
 * One round of questions, each offering the answer given before as its default; undefined when the
 * owner skips (an empty first answer, or the end of input).
 */
async function askChoice(
  prompt: Prompt,
  say: (text?: string) => void,
  previous?: Answers,
): Promise<Answers | undefined> {
  say();
  say("  1) Anthropic (Claude), with an API key");
  say("  2) another provider (openai, google, openrouter, groq, mistral, xai…), with an API key");
  say("  3) a local model or a server of your own (Ollama, llama.cpp, vLLM, LM Studio, a proxy)");
  const typed = await prompt.ask(
    previous ? `Which one? [${previous.which}] ` : "Which one? [1/2/3, Enter to skip] ",
  );
  if (typed === undefined) return undefined;
  const which = typed || previous?.which;
  if (!which) return undefined;
  const same = previous?.which === which ? previous : undefined;
  if (which === "1") {
    const apiKey = await askKey(prompt, "Anthropic API key (sk-ant-…)", same?.apiKey ?? undefined, false);
    if (!apiKey) return undefined;
    const model = await askModel(prompt, "Model", same?.model ?? "claude-sonnet-4-5");
    if (!model) return undefined;
    return { which, provider: "anthropic", model, apiKey };
  }
  if (which === "2") {
    const provider = await askProvider(prompt, say, same?.provider);
    if (!provider) return undefined;
    const model = await askModel(prompt, same?.model ? "Model id" : "Model id (e.g. gpt-4.1)", same?.model);
    if (!model) return undefined;
    const apiKey = await askKey(prompt, `${provider} API key`, same?.apiKey ?? undefined, false);
    if (!apiKey) return undefined;
    return { which, provider, model, apiKey };
  }
  if (which === "3") {
    const baseUrl = await askAddress(prompt, say, same?.baseUrl);
    if (!baseUrl) return undefined;
    const wasAnthropic = same?.api === "anthropic-messages";
    const speaks = await prompt.ask(
      `Does it speak OpenAI's API or Anthropic's? [${wasAnthropic ? "o/A" : "O/a"}] `,
    );
    if (speaks === undefined) return undefined;
    const anthropic = speaks ? /^a/i.test(speaks) : wasAnthropic;
    const model = await askModel(
      prompt,
      same?.model ? "Model id as the server names it" : "Model id as the server names it (e.g. llama3.1:8b)",
      same?.model,
    );
    if (!model) return undefined;
    const apiKey = await askKey(prompt, "API key", same?.apiKey ?? undefined, true);
    if (apiKey === undefined) return undefined;
    return {
      which,
      provider: "local",
      model,
      baseUrl,
      api: anthropic ? "anthropic-messages" : "openai-completions",
      ...(apiKey ? { apiKey } : {}),
    };
  }
  say(`"${which}" is not one of 1, 2 or 3.`);
  return askChoice(prompt, say, previous);
}

async function askModel(prompt: Prompt, question: string, previous: string | undefined) {
  const typed = await prompt.ask(withDefault(question, previous));
  if (typed === undefined) return undefined;
  return typed || previous;
}

/** A provider's name, asked until it is one the assistant knows (with the closest names when not). */
async function askProvider(prompt: Prompt, say: (text?: string) => void, previous: string | undefined) {
  for (;;) {
    const typed = await prompt.ask(withDefault("Provider (e.g. openai)", previous));
    if (typed === undefined) return undefined;
    const provider = typed || previous;
    if (!provider) return undefined;
    const unknown = unknownProviderMessage(provider);
    if (!unknown) return provider;
    const near = closestNames(provider, knownProviders());
    say(
      near.length > 0
        ? `No provider "${provider}" is known. Did you mean ${quotedList(near)}?`
        : `No provider "${provider}" is known. The providers are ${knownProviders().join(", ")}.`,
    );
    say("  (For a server of your own, choose 3.)");
  }
}

/** A server's address, asked until it is one: `http://` is put in front of one typed without it. */
async function askAddress(prompt: Prompt, say: (text?: string) => void, previous: string | undefined) {
  const fallback = previous ?? "http://localhost:11434/v1";
  for (;;) {
    const typed = await prompt.ask(
      previous
        ? withDefault("Server address", previous)
        : "Server address [http://localhost:11434/v1, Ollama's]: ",
    );
    if (typed === undefined) return undefined;
    const address = typedAddress(typed || fallback);
    if ("url" in address) {
      if (address.note) say(`  Note: ${address.note}.`);
      return address.url;
    }
    say(address.error);
  }
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
