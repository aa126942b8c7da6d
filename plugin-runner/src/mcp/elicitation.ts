import { randomInt } from "node:crypto";
import type { ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { DomainError, errorMessage } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";

/**
 * A server's questions to the owner (MCP elicitation, form mode): asked mid tool call, told to the
 * owner through the app (on their channel and in the web admin), answered by the owner's
 * `/answer <id> key=value …`, `/decline <id>` or `/cancel <id>`, which the app hands back here.
 * Only a flat form is asked (the spec's own limit: text, number, yes/no and choice fields); the
 * owner's answer is checked against it before the server sees it. A question not answered in
 * time is cancelled, and the server decides what its tool call does then.
 */

interface FieldBase {
  name: string;
  title?: string;
  description?: string;
  required: boolean;
  default?: unknown;
}
interface Choice {
  value: string;
  title?: string;
}
export type Field = FieldBase &
  (
    | { kind: "text"; minLength?: number; maxLength?: number; format?: string }
    | { kind: "number"; integer: boolean; minimum?: number; maximum?: number }
    | { kind: "boolean" }
    | { kind: "choice"; choices: Choice[] }
    | { kind: "choices"; choices: Choice[]; minItems?: number; maxItems?: number }
  );

type Json = Record<string, unknown>;

const num = (value: unknown): number | undefined => (typeof value === "number" ? value : undefined);
const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

/** The choices of an enum field: `enum` (with the older `enumNames` as titles) or `oneOf`/`anyOf` of `{const, title}`. */
function choicesOf(schema: Json): Choice[] | undefined {
  if (Array.isArray(schema.enum)) {
    const names = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    return schema.enum.map((value, index) => {
      const title = str(names[index]);
      return { value: String(value), ...(title ? { title } : {}) };
    });
  }
  const options = Array.isArray(schema.oneOf)
    ? schema.oneOf
    : Array.isArray(schema.anyOf)
      ? schema.anyOf
      : undefined;
  if (!options) return undefined;
  return options.map((option: unknown) => {
    const { const: value, title } = (option ?? {}) as Json;
    return { value: String(value), ...(typeof title === "string" ? { title } : {}) };
  });
}

/**
 * The fields of a requested schema: top-level properties of the kinds the spec allows. Anything
 * else (a nested object, an array of something other than choices) is refused with the reason.
 */
export function formFields(requested: unknown): Field[] {
  const { properties, required } = (requested ?? {}) as Json;
  if (!properties || typeof properties !== "object")
    throw new Error("the requested schema has no properties");
  const needed = new Set(Array.isArray(required) ? required.map(String) : []);
  return Object.entries(properties as Record<string, Json>).map(([name, schema]) => {
    const base: FieldBase = {
      name,
      required: needed.has(name),
      ...(str(schema.title) ? { title: str(schema.title) } : {}),
      ...(str(schema.description) ? { description: str(schema.description) } : {}),
      ...(schema.default !== undefined ? { default: schema.default } : {}),
    };
    const choices = choicesOf(schema);
    if (schema.type === "string" && choices) return { ...base, kind: "choice", choices };
    if (schema.type === "string") {
      const minLength = num(schema.minLength);
      const maxLength = num(schema.maxLength);
      const format = str(schema.format);
      return {
        ...base,
        kind: "text",
        ...(minLength !== undefined ? { minLength } : {}),
        ...(maxLength !== undefined ? { maxLength } : {}),
        ...(format ? { format } : {}),
      };
    }
    if (schema.type === "number" || schema.type === "integer") {
      const minimum = num(schema.minimum);
      const maximum = num(schema.maximum);
      return {
        ...base,
        kind: "number",
        integer: schema.type === "integer",
        ...(minimum !== undefined ? { minimum } : {}),
        ...(maximum !== undefined ? { maximum } : {}),
      };
    }
    if (schema.type === "boolean") return { ...base, kind: "boolean" };
    const items = (schema.items ?? {}) as Json;
    const listed = schema.type === "array" ? choicesOf(items) : undefined;
    if (listed) {
      const minItems = num(schema.minItems);
      const maxItems = num(schema.maxItems);
      return {
        ...base,
        kind: "choices",
        choices: listed,
        ...(minItems !== undefined ? { minItems } : {}),
        ...(maxItems !== undefined ? { maxItems } : {}),
      };
    }
    throw new Error(`its field "${name}" is not a text, number, yes/no or choice field`);
  });
}

function choiceList(choices: Choice[]): string {
  return choices
    .map((choice) => (choice.title ? `${choice.value} = ${choice.title}` : choice.value))
    .join(", ");
}

function range(low: number | undefined, high: number | undefined): string {
  if (low !== undefined && high !== undefined) return ` ${low}–${high}`;
  if (low !== undefined) return ` at least ${low}`;
  return high !== undefined ? ` at most ${high}` : "";
}

/** One line of the question per field: its name, kind, limits, default and description. */
export function fieldLine(field: Field): string {
  const kind = (() => {
    switch (field.kind) {
      case "text":
        return `text${field.format ? ` (${field.format})` : ""}${field.minLength !== undefined || field.maxLength !== undefined ? `, length${range(field.minLength, field.maxLength)}` : ""}`;
      case "number":
        return `${field.integer ? "whole number" : "number"}${range(field.minimum, field.maximum)}`;
      case "boolean":
        return "yes/no";
      case "choice":
        return `one of: ${choiceList(field.choices)}`;
      case "choices":
        return `${field.minItems !== undefined || field.maxItems !== undefined ? `${range(field.minItems, field.maxItems).trim()} ` : ""}of: ${choiceList(field.choices)}, separated by commas`;
    }
  })();
  const parts = [
    kind,
    ...(field.required ? ["required"] : []),
    ...(field.default !== undefined ? [`default ${shown(field.default)}`] : []),
  ];
  const about = [field.title, field.description].filter(Boolean).join(": ");
  return `- ${field.name} (${parts.join("; ")})${about ? ` – ${about}` : ""}`;
}

function shown(value: unknown): string {
  return Array.isArray(value) ? value.join(",") : String(value);
}

const YES = new Set(["yes", "y", "true", "on", "1"]);
const NO = new Set(["no", "n", "false", "off", "0"]);

function pick(field: Field & { choices: Choice[] }, text: string): string | undefined {
  const wanted = text.trim().toLowerCase();
  return field.choices.find(
    (choice) => choice.value.toLowerCase() === wanted || choice.title?.toLowerCase() === wanted,
  )?.value;
}

/** A field's value from the owner's text, or why it cannot be one. */
function valueOf(field: Field, text: string): { value: unknown } | { problem: string } {
  const named = `"${field.name}"`;
  switch (field.kind) {
    case "text": {
      if (field.minLength !== undefined && text.length < field.minLength)
        return { problem: `${named} must be at least ${field.minLength} characters` };
      if (field.maxLength !== undefined && text.length > field.maxLength)
        return { problem: `${named} must be at most ${field.maxLength} characters` };
      const bad = formatProblem(field.format, text);
      return bad ? { problem: `${named} must be ${bad}` } : { value: text };
    }
    case "number": {
      const value = text.trim() === "" ? Number.NaN : Number(text);
      if (!Number.isFinite(value)) return { problem: `${named} must be a number` };
      if (field.integer && !Number.isInteger(value)) return { problem: `${named} must be a whole number` };
      if (field.minimum !== undefined && value < field.minimum)
        return { problem: `${named} must be at least ${field.minimum}` };
      if (field.maximum !== undefined && value > field.maximum)
        return { problem: `${named} must be at most ${field.maximum}` };
      return { value };
    }
    case "boolean": {
      const said = text.trim().toLowerCase();
      if (YES.has(said)) return { value: true };
      if (NO.has(said)) return { value: false };
      return { problem: `${named} must be yes or no` };
    }
    case "choice": {
      const value = pick(field, text);
      return value === undefined
        ? { problem: `${named} must be one of: ${choiceList(field.choices)}` }
        : { value };
    }
    case "choices": {
      const words = text
        .split(",")
        .map((word) => word.trim())
        .filter(Boolean);
      const values: string[] = [];
      for (const word of words) {
        const value = pick(field, word);
        if (value === undefined)
          return { problem: `${named}: "${word}" is not one of: ${choiceList(field.choices)}` };
        if (!values.includes(value)) values.push(value);
      }
      if (field.minItems !== undefined && values.length < field.minItems)
        return {
          problem: `${named} needs at least ${field.minItems} choice${field.minItems === 1 ? "" : "s"}`,
        };
      if (field.maxItems !== undefined && values.length > field.maxItems)
        return {
          problem: `${named} takes at most ${field.maxItems} choice${field.maxItems === 1 ? "" : "s"}`,
        };
      return { value: values };
    }
  }
}

/** What a text of the given `format` must look like, when it does not. */
function formatProblem(format: string | undefined, text: string): string | undefined {
  switch (format) {
    case "email":
      return /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(text) ? undefined : "an email address";
    case "uri":
      return URL.canParse(text) && /^[a-z][a-z0-9+.-]*:/i.test(text) ? undefined : "an address (a URI)";
    case "date": {
      const valid =
        /^\d{4}-\d{2}-\d{2}$/.test(text) && new Date(`${text}T00:00:00Z`).toISOString().startsWith(text);
      return valid ? undefined : "a date as YYYY-MM-DD";
    }
    case "date-time":
      return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(text) && !Number.isNaN(Date.parse(text))
        ? undefined
        : "a date and time as YYYY-MM-DDTHH:MM (with a zone, e.g. Z or +02:00)";
    default:
      return undefined;
  }
}

/**
 * The content of an accepted answer: each field from the owner's `key=value`, a field not given
 * taking its default; unknown names, wrong values and missing required fields are all named.
 */
export function answerContent(
  fields: Field[],
  given: Record<string, string>,
): { content: Record<string, unknown> } | { problems: string[] } {
  const problems: string[] = [];
  const unknown = Object.keys(given).filter((key) => !fields.some((field) => field.name === key));
  if (unknown.length > 0)
    problems.push(
      `no field ${unknown.map((key) => `"${key}"`).join(", ")} (its fields: ${fields.map((field) => field.name).join(", ")})`,
    );
  const content: Record<string, unknown> = {};
  for (const field of fields) {
    const text = given[field.name];
    if (text === undefined) {
      if (field.default !== undefined) content[field.name] = field.default;
      else if (field.required) problems.push(`"${field.name}" is required`);
      continue;
    }
    const checked = valueOf(field, text);
    if ("problem" in checked) problems.push(checked.problem);
    else content[field.name] = checked.value;
  }
  return problems.length > 0 ? { problems } : { content };
}

/** A question as the owner is told it (through the app). */
export interface ToldQuestion {
  id: string;
  plugin: string;
  text: string;
}

export interface OwnerQuestionsDeps {
  /** Tells the owner (the app's internal `POST /questions`); a failure cancels the question. */
  tell(question: ToldQuestion): Promise<void>;
  logger: Logger;
}

interface Pending {
  server: string;
  fields: Field[];
  timer: NodeJS.Timeout;
  settle(result: ElicitResult): void;
}

export interface Asked {
  /** The server's plugin name. */
  server: string;
  /** The server's message, secrets removed. */
  message: string;
  fields: Field[];
  /** The server's tools whose calls were running when it asked (the text names them). */
  during: string[];
  limitMs: number;
  /** The server withdrew it (its request was cancelled). */
  signal?: AbortSignal;
}

/** Question ids: short, typed by the owner, never numbers (an approval's id is one). */
const ID_LETTERS = "abcdefghjkmnpqrstuvwxyz23456789";

/** The questions waiting for the owner, of every server: one registry for the runner. */
export class OwnerQuestions {
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly deps: OwnerQuestionsDeps) {}

  /** Asks the owner; resolves with their answer, or `cancel` when the time is up or they cannot be told. */
  async ask(asked: Asked): Promise<ElicitResult> {
    const id = this.newId();
    const minutes = Math.round(asked.limitMs / 6_000) / 10;
    const example = asked.fields
      .slice(0, 2)
      .map((field) => `${field.name}=…`)
      .join(" ");
    const text = [
      `MCP server "${asked.server}" asks you${asked.during.length > 0 ? ` (while its tool ${asked.during.map((tool) => `"${tool}"`).join(", ")} runs)` : ""}: ${asked.message}`,
      ...(asked.fields.length > 0 ? ["Fields:", ...asked.fields.map(fieldLine)] : []),
      `Reply "/answer ${id}${example ? ` ${example}` : ""}" (a value with spaces in double quotes), ` +
        `"/decline ${id}" to refuse, or "/cancel ${id}". Without an answer within ${minutes} min it is cancelled.`,
    ].join("\n");
    return new Promise<ElicitResult>((resolve) => {
      const settle = (result: ElicitResult) => {
        if (this.pending.get(id)?.settle !== settle) return;
        clearTimeout(this.pending.get(id)?.timer);
        this.pending.delete(id);
        this.deps.logger.info("an MCP server's question was settled", {
          server: asked.server,
          id,
          action: result.action,
        });
        resolve(result);
      };
      const timer = setTimeout(() => settle({ action: "cancel" }), asked.limitMs);
      timer.unref();
      this.pending.set(id, { server: asked.server, fields: asked.fields, timer, settle });
      asked.signal?.addEventListener("abort", () => settle({ action: "cancel" }), { once: true });
      this.deps.tell({ id, plugin: asked.server, text }).catch((error: unknown) => {
        this.deps.logger.warn("could not tell the owner an MCP server's question; it is cancelled", {
          server: asked.server,
          error: errorMessage(error),
        });
        settle({ action: "cancel" });
      });
    });
  }

  /**
   * The owner's answer to question `id`: what to tell them. A wrong accepted answer is refused
   * with every problem named, and the question keeps waiting for a better one.
   */
  answer(id: string, action: ElicitResult["action"], values: Record<string, string> = {}): string {
    const question = this.pending.get(id);
    if (!question)
      throw new DomainError(
        "not-found",
        `No question ${id} waits for an answer (it was answered or cancelled, its time ran out, or the plugin runner restarted and so ended the call that asked it).`,
      );
    if (action !== "accept") {
      question.settle({ action });
      return `${action === "decline" ? "Declined" : "Cancelled"}: MCP server "${question.server}" was told.`;
    }
    const checked = answerContent(question.fields, values);
    if ("problems" in checked)
      throw new DomainError(
        "invalid",
        `Not sent: ${checked.problems.join("; ")}. Question ${id} still waits; answer again.`,
      );
    question.settle({ action: "accept", content: checked.content as ElicitResult["content"] });
    return `Answered: MCP server "${question.server}" has your answer.`;
  }

  /** Cancels what `server` still asks (no call of it waits any more, or it stopped). */
  withdraw(server: string): void {
    for (const question of [...this.pending.values()])
      if (question.server === server) question.settle({ action: "cancel" });
  }

  private newId(): string {
    for (;;) {
      let id = "";
      for (let i = 0; i < 4; i++) id += ID_LETTERS[randomInt(ID_LETTERS.length)];
      if (!this.pending.has(id)) return id;
    }
  }
}

/**
 * A call's time limit, which stops counting while the server waits for the owner: at most
 * `questionMs` in all for one call, so a call lasts no longer than its limit and that.
 */
export class CallClock {
  private deadline: number;
  private paused = 0;
  private pausedAt = 0;
  private remaining = 0;
  private waited = 0;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    timeoutMs: number,
    private readonly questionMs: number,
    private readonly onTimeout: () => void,
    private readonly now: () => number = Date.now,
  ) {
    this.deadline = this.now() + timeoutMs;
    this.arm();
  }

  /** How much of the call's time for questions is left. */
  questionTimeLeft(): number {
    return this.questionMs - this.waited - (this.paused > 0 ? this.now() - this.pausedAt : 0);
  }

  pause(): void {
    if (this.paused++ > 0) return;
    clearTimeout(this.timer);
    this.pausedAt = this.now();
    this.remaining = this.deadline - this.pausedAt;
  }

  resume(): void {
    if (this.paused === 0 || --this.paused > 0) return;
    this.waited += this.now() - this.pausedAt;
    this.deadline = this.now() + this.remaining;
    this.arm();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.stopped = true;
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(this.onTimeout, Math.max(0, this.deadline - this.now()));
  }
}
