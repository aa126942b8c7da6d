import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname } from "node:path";
import { z } from "zod";
import { emailSchema } from "../channels/email/config.js";
import { ConfigError, loadTomlConfig, mcpServersSchema, parseTomlConfig } from "@stavrobot/common";
import { normalizePagePath } from "../db/pages.js";
import { expandMcpVariables, type MissingVariables } from "./mcp-variables.js";

const thinkingLevels = ["off", "minimal", "low", "medium", "high", "xhigh"] as const;
const apiKinds = ["anthropic-messages", "openai-completions"] as const;

/** OpenAI's audio API, or any server speaking it (set baseUrl). */
const openAiAudio = z.strictObject({
  /** A label for logs: every provider is reached through the OpenAI-compatible API at baseUrl. */
  provider: z.string().min(1).default("openai"),
  apiKey: z.string().min(1),
  model: z.string().min(1),
  baseUrl: z.url().optional(),
});

/** An Anthropic Messages endpoint and model for a sub-agent (web search, web fetch). */
const anthropicHelper = z.strictObject({
  apiKey: z.string().min(1),
  model: z.string().min(1),
  baseUrl: z.url().optional(),
});

/**
 * Any server speaking OpenAI's `POST /embeddings` (OpenAI, Gemini's and Mistral's compatible
 * endpoints, Voyage, Ollama, LM Studio, llama.cpp, vLLM): db_search then finds what was meant.
 */
const embeddingsSchema = z.strictObject({
  baseUrl: z
    .url()
    .refine(
      (value) => /^https?:\/\//.test(value),
      "must be an http(s):// URL, e.g. https://api.openai.com/v1",
    ),
  /** Local servers (Ollama, llama.cpp) need none. */
  apiKey: z.string().min(1).optional(),
  model: z.string().min(1, "must name the embedding model, e.g. text-embedding-3-small"),
  /** For models that can shorten their vectors (text-embedding-3-*, Gemini, Voyage). */
  dimensions: z.number().int().min(1).max(8192, "must be at most 8192").optional(),
  /** Put before a search's words (some models want e.g. "search_query: "). */
  queryPrefix: z.string().default(""),
  /** Put before each indexed text (e.g. "search_document: "). */
  documentPrefix: z.string().default(""),
});

/** US dollars per million tokens of one kind. */
const pricePerMillion = z.number().min(0, "must be US dollars per million tokens, 0 or more").optional();

const e164 = z
  .string()
  .regex(/^\+[1-9]\d{1,14}$/, "must be a phone number in international form, e.g. +15555550123");

/** Every key the app reads from config.toml. config.example.toml documents each one. */
/** An https:// (or http://) origin a page may reach: scheme and host, nothing after. */
const webOrigin = z
  .string()
  .regex(
    /^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?$/,
    "must be an origin such as https://cdn.example.com (no path)",
  );

export const configSchema = z
  .strictObject({
    provider: z.string().min(1).default("anthropic"),
    model: z.string().min(1),
    password: z
      .string()
      .min(8, "must be at least 8 characters")
      .refine((value) => value !== "CHANGE-ME", "replace the example placeholder with a real password"),
    apiKey: z.string().min(1).optional(),
    authFile: z.string().min(1).optional(),
    publicHostname: z
      .url()
      .refine(
        (value) => /^https?:\/\//.test(value) && !value.endsWith("/"),
        "must be http(s):// with no trailing slash",
      )
      .optional(),
    customPrompt: z.string().optional(),
    baseUrl: z
      .url()
      .refine(
        (value) => /^https?:\/\//.test(value),
        "must be an http:// or https:// address, e.g. http://localhost:11434/v1",
      )
      .optional(),
    api: z.enum(apiKinds).optional(),
    contextWindow: z.number().int().positive().optional(),
    maxTokens: z.number().int().positive().optional(),
    /** Over the listed (or template) model's prices; a custom endpoint's are 0 without it. */
    cost: z
      .strictObject({
        input: pricePerMillion,
        output: pricePerMillion,
        cacheRead: pricePerMillion,
        cacheWrite: pricePerMillion,
      })
      .optional(),
    contextTokensK: z.number().int().min(10).max(2000).default(50),
    thinkingLevel: z.enum(thinkingLevels).default("off"),
    maxToolRounds: z.number().int().min(1).max(1000).default(40),
    toolsOnDemand: z.boolean().default(true),
    earlierResultChars: z.number().int().min(0).max(1_000_000).default(300),
    queue: z
      .strictObject({
        maxRetries: z.number().int().min(0).max(10).default(3),
        retryDelaySeconds: z.number().min(0).max(3600).default(30),
        startWhileWriting: z.boolean().default(true),
      })
      .prefault({}),
    tts: openAiAudio.extend({ voice: z.string().optional(), instructions: z.string().optional() }).optional(),
    stt: openAiAudio.optional(),
    webSearch: anthropicHelper.optional(),
    webFetch: anthropicHelper.extend({ allowPrivateNetworks: z.boolean().default(false) }).optional(),
    coder: z
      .strictObject({
        model: z.string().min(1),
        apiKey: z.string().min(1).optional(),
        baseUrl: z.url().optional(),
      })
      .optional(),
    owner: z
      .strictObject({
        name: z.string().min(1).max(100),
        telegram: z
          .union([z.number().int(), z.string().regex(/^-?\d+$/, "must be a numeric chat id")])
          .optional(),
        signal: e164.optional(),
        whatsapp: e164.optional(),
        /** The owner's address, or a pattern (`*@example.com`): their mail, once its sender is proven. */
        email: z
          .string()
          .regex(/^[^\s@]+@[^\s@]+$/, "must be an email address or a pattern such as *@example.com")
          .optional(),
      })
      .optional(),
    telegram: z
      .strictObject({
        botToken: z.string().regex(/^\d+:[A-Za-z0-9_-]+$/, "must look like 123456:ABC-..."),
        apiBaseUrl: z.url().default("https://api.telegram.org"),
        allowedChatIds: z.array(z.union([z.number().int(), z.string()])).default([]),
      })
      .optional(),
    signal: z.strictObject({ account: e164, allowedNumbers: z.array(z.string()).default([]) }).optional(),
    /**
     * WhatsApp through the whatsapp-bridge (an empty table enables it; the number is linked from
     * the web page). `version`: WhatsApp Web's version to announce, when WhatsApp answers 405.
     */
    whatsapp: z
      .strictObject({
        version: z
          .string()
          .regex(/^\d+\.\d+\.\d+$/, "must be three numbers such as 2.3000.1023223821")
          .optional(),
      })
      .optional(),
    email: emailSchema.optional(),
    budget: z
      .strictObject({
        daily: z.number().positive().optional(),
        monthly: z.number().positive().optional(),
      })
      .optional(),
    /** Read by the launcher for the plugin-runner (see config.example.toml). */
    plugins: z
      .strictObject({
        allowWithoutNetworkCut: z.boolean().default(false),
        /** How long a tool's run may take before it is stopped (the runner's default: 30 s). */
        timeoutSeconds: z
          .number()
          .positive()
          .max(80, "must be at most 80: the agent waits 90 s for a tool")
          .optional(),
        /** Trusted minisign public keys for Osaurus packages (base64, `RW…`). */
        osaurusTrustedKeys: z
          .array(z.string().regex(/^[A-Za-z0-9+/]{56}$/, "must be a minisign public key (RW…)"))
          .default([]),
      })
      .optional(),
    /** Skills the owner installs (skills/): where they may come from and how many the prompt names. */
    skills: z
      .strictObject({
        allowPrivateSources: z.boolean().default(false),
        promptCount: z.number().int().min(0).max(500).default(30),
        promptBytes: z.number().int().min(200).max(65_536).default(3072),
      })
      .prefault({}),
    /** What the model's pages may reach besides their own queries (routes/pages.ts, pages/frame.ts). */
    pages: z
      .strictObject({
        scriptHosts: z.array(webOrigin).default([]),
        connectHosts: z
          .record(z.string(), z.array(webOrigin))
          .superRefine((table, ctx) => {
            for (const path of Object.keys(table))
              if (normalizePagePath(path) !== path)
                ctx.addIssue({
                  code: "custom",
                  path: [path],
                  message: 'must be a page\'s path as manage_pages names it (e.g. "weather" or "trips/2026")',
                });
          })
          .default({}),
      })
      .optional(),
    embeddings: embeddingsSchema.optional(),
    /** Recall before a turn (embeddings/recall.ts): on by default when `[embeddings]` is set. */
    memory: z
      .strictObject({
        autoRecall: z.boolean().default(true),
        /** Snippets recalled into a turn at most. */
        recallLimit: z.number().int().min(1).max(10).default(3),
        /** Cosine similarity a chunk needs to be recalled (depends on the embedding model). */
        recallMinSimilarity: z.number().min(-1).max(1).default(0.35),
      })
      .optional(),
    /** Owner-only rules of the trust gate (trust/gate.ts): calls let through without asking. */
    trust: z
      .strictObject({
        allow: z
          .array(z.string().regex(/^[a-z][a-z0-9_-]*(:[a-z_]+)?$/, 'must be a tool name, or "tool:action"'))
          .default([]),
        plugins: z.enum(["owner-turns", "ask"]).default("owner-turns"),
        /** Plugins ("weather") or their tools ("github/search_issues") the owner says only read. */
        readOnly: z
          .array(
            z
              .string()
              .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*(\/[A-Za-z0-9_.-]+)?$/, 'must be "plugin" or "plugin/tool"'),
          )
          .default([]),
        /** MCP servers whose own `readOnlyHint` the owner believes. */
        readOnlyHints: z.array(z.string().min(1)).default([]),
      })
      .optional(),
    /** The owner's MCP servers, handed to the plugin-runner (see boot/mcp-servers.ts). */
    mcpServers: mcpServersSchema.optional(),
  })
  .superRefine((config, ctx) => {
    if (config.apiKey && config.authFile) {
      ctx.addIssue({
        code: "custom",
        path: ["authFile"],
        message: "set either apiKey or authFile, not both",
      });
    }
    if (config.maxTokens && config.contextWindow && config.maxTokens > config.contextWindow) {
      ctx.addIssue({
        code: "custom",
        path: ["maxTokens"],
        message: `must not be more than contextWindow (${config.contextWindow})`,
      });
    }
    if (config.baseUrl) {
      if (!config.api)
        ctx.addIssue({ code: "custom", path: ["api"], message: "required when baseUrl is set" });
      // The Messages API client adds /v1/messages itself: "…/v1" would be asked at "…/v1/v1/messages".
      if (config.api === "anthropic-messages" && /\/v1\/*$/.test(config.baseUrl)) {
        ctx.addIssue({
          code: "custom",
          path: ["baseUrl"],
          message: `must leave out /v1 with api = "anthropic-messages" (its client adds /v1 itself): baseUrl = "${config.baseUrl.replace(/\/v1\/*$/, "")}"`,
        });
      }
      if (config.authFile) {
        ctx.addIssue({ code: "custom", path: ["authFile"], message: "cannot be used with baseUrl" });
      }
    }
  });

export type AppConfig = z.infer<typeof configSchema>;
export type EmbeddingsConfig = z.infer<typeof embeddingsSchema>;

/**
 * config.toml as the app reads it at start: checked, with `${VAR}` in `[mcpServers]` expanded
 * from `env` (the app's environment); a variable it lacks is refused, naming server, key and
 * variable.
 */
export function loadConfig(path: string, env: NodeJS.ProcessEnv = process.env): Readonly<AppConfig> {
  return loadTomlConfig(path, configSchema, (raw) => expandMcpVariables(raw, env, "refuse"));
}

/**
 * config.toml's text, checked. Where the file is written for the next start (the Settings page,
 * `mcp:import`), a variable this process lacks gets a stand-in: the app's own environment is the
 * one that counts, when it reads the file.
 */
export function parseConfig(
  text: string,
  path: string,
  options: { env?: NodeJS.ProcessEnv; missing?: MissingVariables } = {},
): Readonly<AppConfig> {
  const env = options.env ?? process.env;
  const missing = options.missing ?? "stand-in";
  return parseTomlConfig(text, configSchema, path, (raw) => expandMcpVariables(raw, env, missing));
}

/**
 * First run: no config file yet. Copy the example with a fresh password so the server can start
 * and the owner only has to add a provider key. Returns the generated password, or undefined when
 * a config already existed.
 */
export function ensureConfigFile(path: string, examplePath: string): string | undefined {
  if (existsSync(path)) return undefined;
  if (!existsSync(examplePath))
    throw new ConfigError(`No config at ${path} and no example at ${examplePath}`);
  const password = randomBytes(18).toString("base64url");
  const text = readFileSync(examplePath, "utf8").replace(
    /^password = "CHANGE-ME"$/m,
    `password = "${password}"`,
  );
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, { mode: 0o600, flag: "wx" });
  return password;
}
