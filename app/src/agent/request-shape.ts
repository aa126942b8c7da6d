/**
 * What of a turn's context goes to the model, decided per request and from the conversation
 * alone (so the same history always makes the same request, and the prompt cache holds):
 *
 * - With `toolsOnDemand`, the definitions of the rarely used tools (`ON_DEMAND_TOOLS`, and the
 *   plugin tools while the system prompt lists no plugin, manage_skills while it lists no skill) are sent only once the conversation
 *   loaded them with `load_tools`, or called them, since its last summary. Every tool still runs
 *   when called; only what each request describes changes.
 * - A tool result of an earlier turn longer than `earlierResultChars` is sent as its start and a
 *   note. The model answered from it in its own turn; at the next turn's start only the end of
 *   the cached prefix changes (the previous turn), so the cache keeps serving the rest.
 *
 * The stored conversation is never changed: this makes copies, kept by identity so that a
 * message shortened once is the same object in every later request (the wire keeps each
 * message's JSON by identity).
 */
import type { Context, Message, TextContent, Tool, ToolResultMessage } from "@mariozechner/pi-ai";
import type { ModelStream } from "../model/stream.js";
import {
  LOADABLE_TOOLS,
  LOAD_TOOLS,
  ON_DEMAND_TOOLS,
  PLUGIN_TOOLS,
  SKILL_TOOLS,
} from "../tools/load-tools.js";
import { PLUGIN_LIST_HEADING } from "../plugins/plugin-list.js";
import { SKILL_LIST_HEADING } from "../skills/prompt.js";

export interface RequestShape {
  toolsOnDemand: boolean;
  /** 0: every result whole. */
  earlierResultChars: number;
}

/** `stream` with each request's context shaped by `shape`. */
export function shapeRequests(stream: ModelStream, shape: RequestShape): ModelStream {
  const shaper = new RequestShaper(shape);
  return (model, context, options) => stream(model, shaper.shape(context), options);
}

export class RequestShaper {
  /** Per assistant message: the on-demand tools it loads or calls. */
  private readonly loads = new WeakMap<Message, readonly string[]>();
  private readonly shortened = new WeakMap<Message, Message>();
  /** The last filtered tool list, reused while the same tools are offered. */
  private offered: { from: readonly Tool[]; key: string; tools: Tool[] } | undefined;

  constructor(private readonly options: RequestShape) {}

  shape(context: Context): Context {
    const tools = this.tools(context);
    const messages = this.messages(context.messages);
    if (tools === context.tools && messages === context.messages) return context;
    return { ...context, messages, ...(tools && { tools }) };
  }

  private tools(context: Context): Tool[] | undefined {
    const all = context.tools;
    if (!this.options.toolsOnDemand || !all?.some((tool) => tool.name === LOAD_TOOLS)) return all;
    const loaded = new Set<string>();
    for (const message of context.messages) for (const name of this.loadsOf(message)) loaded.add(name);
    const pluginsListed = context.systemPrompt?.includes(PLUGIN_LIST_HEADING) ?? false;
    const skillsListed = context.systemPrompt?.includes(SKILL_LIST_HEADING) ?? false;
    const onDemand = (name: string) =>
      name in ON_DEMAND_TOOLS ||
      (!pluginsListed && name in PLUGIN_TOOLS) ||
      (!skillsListed && name in SKILL_TOOLS);
    const tools = all.filter((tool) => !onDemand(tool.name) || loaded.has(tool.name));
    const key = tools.map((tool) => tool.name).join(",");
    if (this.offered?.from === all && this.offered.key === key) return this.offered.tools;
    this.offered = { from: all, key, tools };
    return tools;
  }

  private loadsOf(message: Message): readonly string[] {
    if (message.role !== "assistant") return [];
    let names = this.loads.get(message);
    if (names) return names;
    names = message.content.flatMap((block) => {
      if (block.type !== "toolCall") return [];
      if (block.name in LOADABLE_TOOLS) return [block.name];
      const asked: unknown = block.name === LOAD_TOOLS ? block.arguments.names : undefined;
      // The arguments' check turns a lone name into a list before the tool runs; read it so too.
      if (typeof asked === "string") return [asked];
      return Array.isArray(asked) ? asked.filter((name): name is string => typeof name === "string") : [];
    });
    this.loads.set(message, names);
    return names;
  }

  private messages(messages: Message[]): Message[] {
    const limit = this.options.earlierResultChars;
    if (limit <= 0) return messages;
    const turnStart = messages.findLastIndex((message) => message.role === "user");
    let out: Message[] | undefined;
    for (let i = 0; i < turnStart; i++) {
      const message = messages[i] as Message;
      if (message.role !== "toolResult") continue;
      const short = this.shortResult(message, limit);
      if (short === message) continue;
      out ??= messages.slice();
      out[i] = short;
    }
    return out ?? messages;
  }

  private shortResult(message: ToolResultMessage, limit: number): Message {
    const known = this.shortened.get(message);
    if (known) return known;
    const texts = message.content.filter((block): block is TextContent => block.type === "text");
    const text = texts.map((block) => block.text).join("\n");
    let short: Message = message;
    if (text.length > limit) {
      const head = cutAt(text, Math.floor(limit / 2));
      const left = text.length - head.length;
      const note = `\n[${left.toLocaleString("en")} more characters left out: call the tool again to see them.]`;
      const others = message.content.filter((block) => block.type !== "text");
      short = { ...message, content: [{ type: "text", text: head + note }, ...others] };
    }
    this.shortened.set(message, short);
    return short;
  }
}

/** The first `length` characters of `text`, never ending inside a surrogate pair, at a line's end when one is near. */
function cutAt(text: string, length: number): string {
  let end = length;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  const newline = text.lastIndexOf("\n", end);
  if (newline > end * 0.75) end = newline;
  return text.slice(0, end);
}
