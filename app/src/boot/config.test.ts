import { describe, it, expect, beforeEach, afterEach } from "vitest";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ConfigError, parseTomlConfig } from "@stavrobot/common";
import { configSchema, ensureConfigFile, loadConfig } from "./config.js";

const EXAMPLE_PATH = fileURLToPath(new URL("../../../config.example.toml", import.meta.url));
const MINIMAL = 'model = "claude-sonnet-4-5"\npassword = "correct-horse"\n';

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "stavrobot-app-config-"));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function load(text: string) {
  const path = join(dir, "config.toml");
  writeFileSync(path, text);
  return loadConfig(path);
}

function loadError(text: string): string {
  try {
    load(text);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("expected loadConfig to fail");
}

describe("loadConfig", () => {
  it("a minimal config parses with every default", () => {
    const config = load(MINIMAL);
    expect(config).toEqual({
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      password: "correct-horse",
      contextTokensK: 50,
      thinkingLevel: "off",
      maxToolRounds: 40,
      toolsOnDemand: true,
      earlierResultChars: 300,
      queue: { maxRetries: 3, retryDelaySeconds: 30, startWhileWriting: true },
      skills: { allowPrivateSources: false, promptCount: 30, promptBytes: 3072 },
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.queue)).toBe(true);
  });

  it("a partial [queue] keeps the other default", () => {
    expect(load(MINIMAL + "[queue]\nmaxRetries = 0\n").queue).toEqual({
      maxRetries: 0,
      retryDelaySeconds: 30,
      startWhileWriting: true,
    });
  });

  it("missing password names the key", () => {
    expect(loadError('model = "m"\n')).toContain('key "password"');
  });

  it("missing model names the key", () => {
    expect(loadError('password = "correct-horse"\n')).toContain('key "model"');
  });

  it("a short password is refused", () => {
    const message = loadError('model = "m"\npassword = "short"\n');
    expect(message).toContain('key "password"');
    expect(message).toContain("at least 8 characters");
  });

  it("the example placeholder password is refused", () => {
    const message = loadError('model = "m"\npassword = "CHANGE-ME"\n');
    expect(message).toContain('key "password"');
    expect(message).toContain("placeholder");
  });

  it("apiKey and authFile together name authFile", () => {
    const message = loadError(MINIMAL + 'apiKey = "sk-1"\nauthFile = "auth.json"\n');
    expect(message).toContain('key "authFile"');
    expect(message).toContain("either apiKey or authFile");
  });

  it("baseUrl without api names api", () => {
    const message = loadError(MINIMAL + 'baseUrl = "http://localhost:11434/v1"\n');
    expect(message).toContain('key "api"');
    expect(message).not.toContain('key "baseUrl"');
  });

  it("an address without http:// says what to write; an Anthropic one with /v1 says to leave it out", () => {
    expect(loadError(MINIMAL + 'baseUrl = "localhost:4151"\napi = "openai-completions"\n')).toContain(
      'key "baseUrl": must be an http:// or https:// address, e.g. http://localhost:11434/v1',
    );
    expect(
      loadError(MINIMAL + 'baseUrl = "http://127.0.0.1:4151/v1"\napi = "anthropic-messages"\n'),
    ).toContain(
      'key "baseUrl": must leave out /v1 with api = "anthropic-messages" (its client adds /v1 itself): baseUrl = "http://127.0.0.1:4151"',
    );
    // An OpenAI-compatible server's address keeps its /v1.
    expect(load(MINIMAL + 'baseUrl = "http://127.0.0.1:4151/v1"\napi = "openai-completions"\n').baseUrl).toBe(
      "http://127.0.0.1:4151/v1",
    );
  });

  it("baseUrl with authFile names authFile", () => {
    const message = loadError(
      MINIMAL + 'baseUrl = "http://localhost:11434/v1"\napi = "openai-completions"\nauthFile = "a.json"\n',
    );
    expect(message).toContain('key "authFile"');
    expect(message).toContain("baseUrl");
  });

  it("a custom endpoint with api, window and max tokens parses", () => {
    const config = load(
      MINIMAL +
        'baseUrl = "http://localhost:11434/v1"\napi = "openai-completions"\ncontextWindow = 32768\nmaxTokens = 4096\n',
    );
    expect(config.baseUrl).toBe("http://localhost:11434/v1");
    expect(config.api).toBe("openai-completions");
    expect(config.contextWindow).toBe(32768);
    expect(config.maxTokens).toBe(4096);
  });

  it("the model's prices parse inline or as a section, each key optional", () => {
    expect(
      load(MINIMAL + "cost = { input = 3, output = 15.5, cacheRead = 0.3, cacheWrite = 0 }\n").cost,
    ).toEqual({
      input: 3,
      output: 15.5,
      cacheRead: 0.3,
      cacheWrite: 0,
    });
    expect(load(MINIMAL + "[cost]\noutput = 4\n").cost).toEqual({ output: 4 });
  });

  it.each([
    ["contextWindow", 'contextWindow = "200k"', "must be a number, e.g. contextWindow = 30 (it is text)"],
    ["contextWindow", "contextWindow = 0", "must be more than 0"],
    ["maxTokens", "maxTokens = 1.5", "must be a whole number"],
    ["cost", 'cost = "cheap"', "must be a table"],
    ["cost.input", 'cost = { input = "3" }', "must be a number"],
    ["cost.output", "cost = { output = -1 }", "US dollars per million tokens, 0 or more"],
    ["cost.cacheRead", "cost = { cacheRead = nan }", "not a usable number"],
    ["cost.cacheWrite", "cost = { cacheWrite = inf }", "not a usable number"],
    ["cost.inputs", "cost = { inputs = 3 }", 'did you mean "input"?'],
  ])("a wrong %s is refused and named (%s)", (key, line, expected) => {
    const message = loadError(`${MINIMAL}${line}\n`);
    expect(message).toContain(`key "${key}"`);
    expect(message).toContain(expected);
  });

  it("an output limit above the window is refused, naming maxTokens", () => {
    const message = loadError(MINIMAL + "contextWindow = 8192\nmaxTokens = 16384\n");
    expect(message).toContain('key "maxTokens"');
    expect(message).toContain("contextWindow (8192)");
  });

  it("an unknown top-level key (a typo) is refused and named, with the key it most likely meant", () => {
    const message = loadError(MINIMAL + 'modle = "oops"\n');
    expect(message).toContain('key "modle" is not a setting: did you mean "model"?');
  });

  it("an unknown key inside a section is refused and named, with the key it most likely meant", () => {
    const message = loadError(MINIMAL + "[queue]\nmaxRetry = 1\n");
    expect(message).toContain('key "queue.maxRetry" is not a setting in [queue]: did you mean "maxRetries"?');
  });

  it("says what to write, without the validator's jargon", () => {
    const message = loadError('passwrd = "correct-horse"\nthinkingLevel = "hgh"\n');
    expect(message).toContain('key "model" is missing: add model = "…"');
    expect(message).toContain('key "passwrd" is not a setting: did you mean "password"?');
    expect(message).toContain('(it is "hgh"); did you mean "high"?');
    expect(message).not.toMatch(/ZodError|invalid_type|received undefined|expected string/);
  });

  it.each([
    ['publicHostname = "https://a.example.com/"', "publicHostname"],
    ['publicHostname = "ftp://a.example.com"', "publicHostname"],
    ['baseUrl = "not a url"\napi = "openai-completions"', "baseUrl"],
    ['baseUrl = "localhost:4151"\napi = "openai-completions"', "baseUrl"],
    ['api = "gemini"', "api"],
    ["contextTokensK = 5", "contextTokensK"],
    ["contextTokensK = 2001", "contextTokensK"],
    ['thinkingLevel = "max"', "thinkingLevel"],
    ["maxToolRounds = 0", "maxToolRounds"],
    ["maxToolRounds = 2.5", "maxToolRounds"],
    ["maxToolRounds = 1001", "maxToolRounds"],
    ['maxToolRounds = "40"', "maxToolRounds"],
    ["contextWindow = 0", "contextWindow"],
    ["maxTokens = 1.5", "maxTokens"],
    ['provider = ""', "provider"],
    ["[queue]\nmaxRetries = 11", "queue.maxRetries"],
    ['[queue]\nstartWhileWriting = "yes"', "queue.startWhileWriting"],
    ["[queue]\nretryDelaySeconds = -1", "queue.retryDelaySeconds"],
  ])("rejects %s naming %s", (extra, key) => {
    expect(loadError(MINIMAL + extra + "\n")).toContain(`key "${key}"`);
  });

  it("a plugin tool's time limit is at most 80 s (the agent waits 90 s for a tool)", () => {
    expect(load(`${MINIMAL}[plugins]\ntimeoutSeconds = 80\n`).plugins?.timeoutSeconds).toBe(80);
    expect(loadError(`${MINIMAL}[plugins]\ntimeoutSeconds = 81\n`)).toMatch(
      /plugins\.timeoutSeconds.*at most 80: the agent waits 90 s for a tool/,
    );
  });

  it("[embeddings] takes an OpenAI-compatible endpoint and model; what is wrong is named", () => {
    const embeddings = load(
      `${MINIMAL}[embeddings]\nbaseUrl = "http://localhost:11434/v1"\nmodel = "nomic-embed-text"\nqueryPrefix = "search_query: "\n`,
    ).embeddings;
    expect(embeddings).toEqual({
      baseUrl: "http://localhost:11434/v1",
      model: "nomic-embed-text",
      queryPrefix: "search_query: ",
      documentPrefix: "",
    });
    expect(loadError(`${MINIMAL}[embeddings]\nbaseUrl = "https://api.openai.com/v1"\n`)).toContain(
      'key "embeddings.model" is missing',
    );
    expect(loadError(`${MINIMAL}[embeddings]\nbaseUrl = "ftp://x.example"\nmodel = "m"\n`)).toMatch(
      /embeddings\.baseUrl.*must be an http\(s\):\/\/ URL/,
    );
    expect(
      loadError(`${MINIMAL}[embeddings]\nbaseUrl = "https://a.example/v1"\nmodel = "m"\ndimensions = 0\n`),
    ).toContain('key "embeddings.dimensions"');
    expect(
      loadError(`${MINIMAL}[embeddings]\nbaseUrl = "https://a.example/v1"\nmodel = "m"\ndimension = 256\n`),
    ).toContain('did you mean "dimensions"?');
  });

  it("[pages] takes origins, and page paths as manage_pages names them", () => {
    const pages = load(
      `${MINIMAL}[pages]\nscriptHosts = ["https://cdn.jsdelivr.net"]\n[pages.connectHosts]\n"trips/2026" = ["https://api.example.com:8443"]\n`,
    ).pages;
    expect(pages).toEqual({
      scriptHosts: ["https://cdn.jsdelivr.net"],
      connectHosts: { "trips/2026": ["https://api.example.com:8443"] },
    });
    expect(loadError(`${MINIMAL}[pages]\nscriptHosts = ["https://cdn.example.com/lib.js"]\n`)).toMatch(
      /pages\.scriptHosts.*must be an origin such as https:\/\/cdn\.example\.com \(no path\)/,
    );
    expect(loadError(`${MINIMAL}[pages.connectHosts]\n"../x" = ["https://a.example"]\n`)).toMatch(
      /must be a page's path as manage_pages names it/,
    );
  });

  it("accepts a tool round cap from 1 to 1000", () => {
    expect(load(MINIMAL + "maxToolRounds = 1\n").maxToolRounds).toBe(1);
    expect(load(MINIMAL + "maxToolRounds = 1000\n").maxToolRounds).toBe(1000);
  });

  it("accepts a valid publicHostname and every thinking level", () => {
    expect(load(MINIMAL + 'publicHostname = "https://a.example.com"\n').publicHostname).toBe(
      "https://a.example.com",
    );
    for (const level of ["off", "minimal", "low", "medium", "high", "xhigh"]) {
      expect(load(MINIMAL + `thinkingLevel = "${level}"\n`).thinkingLevel).toBe(level);
    }
  });

  it("parses every optional section when valid, with their defaults", () => {
    const config = load(
      MINIMAL +
        `
[tts]
apiKey = "sk-tts"
model = "gpt-4o-mini-tts"
voice = "alloy"
instructions = "Speak calmly."

[stt]
provider = "groq"
apiKey = "sk-stt"
model = "whisper"
baseUrl = "https://api.groq.com/openai/v1"

[webSearch]
apiKey = "sk-ws"
model = "claude-haiku-4-5"

[webFetch]
apiKey = "sk-wf"
model = "claude-haiku-4-5"

[coder]
model = "sonnet"

[owner]
name = "Ada"
telegram = 123456789
signal = "+15555550124"

[telegram]
botToken = "123456:ABC"
allowedChatIds = [123456789, "@channel"]

[signal]
account = "+15555550123"
`,
    );
    expect(config.tts).toEqual({
      provider: "openai",
      apiKey: "sk-tts",
      model: "gpt-4o-mini-tts",
      voice: "alloy",
      instructions: "Speak calmly.",
    });
    expect(config.stt).toEqual({
      provider: "groq",
      apiKey: "sk-stt",
      model: "whisper",
      baseUrl: "https://api.groq.com/openai/v1",
    });
    expect(config.webSearch).toEqual({ apiKey: "sk-ws", model: "claude-haiku-4-5" });
    expect(config.webFetch).toEqual({
      apiKey: "sk-wf",
      model: "claude-haiku-4-5",
      allowPrivateNetworks: false,
    });
    expect(config.coder).toEqual({ model: "sonnet" });
    expect(config.owner).toEqual({ name: "Ada", telegram: 123456789, signal: "+15555550124" });
    expect(config.telegram).toEqual({
      botToken: "123456:ABC",
      apiBaseUrl: "https://api.telegram.org",
      allowedChatIds: [123456789, "@channel"],
    });
    expect(config.signal).toEqual({ account: "+15555550123", allowedNumbers: [] });
    expect(Object.isFrozen(config.telegram?.allowedChatIds)).toBe(true);
  });

  it("telegram.allowedChatIds defaults to an empty list", () => {
    expect(load(MINIMAL + '[telegram]\nbotToken = "1:t"\n').telegram).toEqual({
      botToken: "1:t",
      apiBaseUrl: "https://api.telegram.org",
      allowedChatIds: [],
    });
  });

  it.each([
    ["[telegram]\nallowedChatIds = [1]", "telegram.botToken"],
    ['[telegram]\nbotToken = ""', "telegram.botToken"],
    ['[telegram]\nbotToken = "1:t"\nallowedChatIds = [1.5]', "telegram.allowedChatIds.0"],
    ['[telegram]\nbotToken = "not a token"', "telegram.botToken"],
    ['[owner]\nsignal = "+1555"', "owner.name"],
    ['[owner]\nname = "A"\nsignal = "555"', "owner.signal"],
    ['[webFetch]\napiKey = "k"\nmodel = "m"\nallowPrivateNetworks = "yes"', "webFetch.allowPrivateNetworks"],
    ['[tts]\napiKey = "k"', "tts.model"],
    ['[tts]\napiKey = "k"\nmodel = "m"\nbaseUrl = "nope"', "tts.baseUrl"],
    ['[stt]\napiKey = ""\nmodel = "m"', "stt.apiKey"],
    ['[webSearch]\napiKey = "k"', "webSearch.model"],
    ['[webFetch]\nmodel = "m"', "webFetch.apiKey"],
    ["[coder]\nmodel = 5", "coder.model"],
    ['[signal]\nallowedNumbers = ["+1"]', "signal.account"],
    ['[signal]\naccount = "+15555550123"\nallowedNumbers = [1]', "signal.allowedNumbers.0"],
    ['[signal]\naccount = "5555"', "signal.account"],
  ])("reports the key path of an invalid section: %s → %s", (extra, key) => {
    expect(loadError(MINIMAL + extra + "\n")).toContain(`key "${key}"`);
  });

  it("an unknown key inside an optional section is refused", () => {
    const message = loadError(MINIMAL + '[coder]\nmodel = "sonnet"\nmodle = "x"\n');
    expect(message).toContain('key "coder.modle" is not a setting in [coder]: did you mean "model"?');
  });
});

describe("ensureConfigFile", () => {
  it("copies the shipped example with a generated password (mode 0600) and the result loads", () => {
    const path = join(dir, "data", "main", "config.toml");
    const password = ensureConfigFile(path, EXAMPLE_PATH);
    expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/);

    const example = readFileSync(EXAMPLE_PATH, "utf8");
    const written = readFileSync(path, "utf8");
    expect(example).toMatch(/^password = "CHANGE-ME"$/m);
    expect(written).not.toContain("CHANGE-ME");
    expect(written).toContain(`password = "${password}"`);
    expect(written).toBe(example.replace('password = "CHANGE-ME"', `password = "${password}"`));
    expect(statSync(path).mode & 0o777).toBe(0o600);

    const config = loadConfig(path);
    expect(config.password).toBe(password);
    expect(config.model.length).toBeGreaterThan(0);
    expect(config.queue).toEqual({ maxRetries: 3, retryDelaySeconds: 30, startWhileWriting: true });
  });

  it("generates a different password each time", () => {
    const a = ensureConfigFile(join(dir, "a.toml"), EXAMPLE_PATH);
    const b = ensureConfigFile(join(dir, "b.toml"), EXAMPLE_PATH);
    expect(a).toBeDefined();
    expect(a).not.toBe(b);
  });

  it("a second call returns undefined and leaves the file unchanged", () => {
    const path = join(dir, "config.toml");
    expect(ensureConfigFile(path, EXAMPLE_PATH)).toBeDefined();
    const before = readFileSync(path, "utf8");
    const mtime = statSync(path).mtimeMs;
    expect(ensureConfigFile(path, EXAMPLE_PATH)).toBeUndefined();
    expect(readFileSync(path, "utf8")).toBe(before);
    expect(statSync(path).mtimeMs).toBe(mtime);
  });

  it("never touches an existing config, even one without a password", () => {
    const path = join(dir, "config.toml");
    writeFileSync(path, 'model = "mine"\n');
    expect(ensureConfigFile(path, EXAMPLE_PATH)).toBeUndefined();
    expect(readFileSync(path, "utf8")).toBe('model = "mine"\n');
  });

  it("no config and no example is a ConfigError naming both paths, creating nothing", () => {
    const path = join(dir, "config.toml");
    const example = join(dir, "missing.example.toml");
    expect(() => ensureConfigFile(path, example)).toThrow(ConfigError);
    expect(() => ensureConfigFile(path, example)).toThrow(example);
    expect(existsSync(path)).toBe(false);
  });
});

describe("config.example.toml documents every key", () => {
  /** The example with commented-out settings (`# key = value`, `# [section]`) switched on. */
  function exampleWithEverything(): Record<string, unknown> {
    const text = readFileSync(EXAMPLE_PATH, "utf8")
      .split("\n")
      .map((line) =>
        /^#\s?(\[[A-Za-z.]+\]|[A-Za-z]\w*\s*=.*)$/.test(line) ? line.replace(/^#\s?/, "") : line,
      )
      .join("\n");
    return parseTomlConfig(text, z.record(z.string(), z.unknown()), EXAMPLE_PATH);
  }

  function objectShape(schema: z.ZodType): Record<string, z.ZodType> | undefined {
    let current: z.ZodType = schema;
    for (let i = 0; i < 5; i++) {
      if (current instanceof z.ZodObject) return current.shape as Record<string, z.ZodType>;
      if (current instanceof z.ZodOptional) current = current.unwrap() as z.ZodType;
      else if (current instanceof z.ZodPrefault || current instanceof z.ZodDefault)
        current = current.unwrap() as z.ZodType;
      else return undefined;
    }
    return undefined;
  }

  const shape = configSchema.shape as Record<string, z.ZodType>;
  const sections = Object.entries(shape).flatMap(([key, schema]) => {
    const inner = objectShape(schema);
    return inner ? [[key, Object.keys(inner)] as const] : [];
  });

  it("introspection finds the expected keys and sections", () => {
    expect(Object.keys(shape)).toEqual(
      expect.arrayContaining(["provider", "model", "password", "apiKey", "authFile", "queue", "telegram"]),
    );
    expect(sections.map(([name]) => name).sort()).toEqual(
      [
        "budget",
        "pages",
        "plugins",
        "coder",
        "cost",
        "email",
        "embeddings",
        "memory",
        "owner",
        "queue",
        "signal",
        "skills",
        "stt",
        "telegram",
        "trust",
        "tts",
        "webFetch",
        "webSearch",
        "whatsapp",
      ].sort(),
    );
  });

  it("every top-level key of configSchema appears in the example, and nothing else", () => {
    const documented = exampleWithEverything();
    expect(Object.keys(documented).sort()).toEqual(Object.keys(shape).sort());
  });

  it.each(sections)("every key of [%s] appears in the example, and nothing else", (name, keys) => {
    const section = exampleWithEverything()[name];
    expect(section).toBeTypeOf("object");
    expect(Object.keys(section as object).sort()).toEqual([...keys].sort());
  });

  it("the example as shipped (placeholder password replaced) is itself valid", () => {
    const text = readFileSync(EXAMPLE_PATH, "utf8").replace('"CHANGE-ME"', '"a-real-password"');
    const config = parseTomlConfig(text, configSchema, EXAMPLE_PATH);
    expect(config.password).toBe("a-real-password");
  });
});
