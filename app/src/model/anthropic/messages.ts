/**
 * The conversation as Anthropic's Messages API wants it, written as JSON text a message at a time
 * and kept: a turn's request carries the whole history, and converting and encoding hundreds of
 * messages again for every model call was most of what a request cost us. A message is immutable
 * once it is in the history, so its JSON is computed once (per model) and reused.
 *
 * What is sent is what pi-ai's Anthropic provider sends for the same history (its
 * `transformMessages` + `convertMessages`; `wire-parity.test.ts` holds the two side by side), in
 * the shortest form the API takes (an answer that is one text as a string, `is_error` only when
 * true):
 * errored or aborted answers left out, tool calls that never got a result answered with
 * "No result provided", consecutive tool results in one user message, text the API refuses (empty
 * blocks, lone surrogates) dropped, images replaced by a note for a model without image input,
 * another model's thinking kept as text, and a cache breakpoint on the last user message.
 */
import type {
  Api,
  AssistantMessage,
  ImageContent,
  Message,
  Model,
  TextContent,
  ToolResultMessage,
  UserMessage,
} from "@mariozechner/pi-ai";

export interface CacheControl {
  type: "ephemeral";
  ttl?: "1h";
}

/** One message's contribution, as computed for one model. */
type Entry =
  | { model: string; role: "user"; message: string | undefined; blocks: string[] | undefined; text?: string }
  | {
      model: string;
      role: "assistant";
      message: string | undefined;
      /** Left out of the request, with whatever it asked for (an errored or aborted answer). */
      failed: boolean;
      /** Its tool calls' ids as the request carries them, with the id the history knows them by. */
      calls: { id: string; sent: string; name: string }[];
    }
  | { model: string; role: "toolResult"; block: string };

const USER_IMAGE_NOTE = "(image omitted: model does not support images)";
const TOOL_IMAGE_NOTE = "(tool image omitted: model does not support images)";
const NO_RESULT = "No result provided";

/** Removes unpaired UTF-16 surrogates, which the API's JSON parser refuses. */
export function withoutLoneSurrogates(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "");
}

/** Anthropic's tool ids match ^[a-zA-Z0-9_-]+$ and are at most 64 characters. */
function anthropicToolId(id: string): string {
  return id.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, 64);
}

const json = JSON.stringify;

/** Images as a note for a model that cannot see them (one note for several in a row). */
function visible<T extends TextContent | ImageContent>(
  content: T[],
  model: Model<Api>,
  note: string,
): (TextContent | ImageContent)[] {
  if (model.input.includes("image")) return content;
  const result: (TextContent | ImageContent)[] = [];
  let afterNote = false;
  for (const block of content) {
    if (block.type === "image") {
      if (!afterNote) result.push({ type: "text", text: note });
      afterNote = true;
      continue;
    }
    result.push(block);
    afterNote = block.text === note;
  }
  return result;
}

function imageBlock(block: ImageContent): string {
  return json({ type: "image", source: { type: "base64", media_type: block.mimeType, data: block.data } });
}

function textBlock(text: string): string {
  return json({ type: "text", text: withoutLoneSurrogates(text) });
}

function userEntry(message: UserMessage, model: Model<Api>, key: string): Entry {
  if (typeof message.content === "string") {
    if (message.content.trim().length === 0)
      return { model: key, role: "user", message: undefined, blocks: undefined };
    const text = withoutLoneSurrogates(message.content);
    return {
      model: key,
      role: "user",
      message: json({ role: "user", content: text }),
      blocks: undefined,
      text,
    };
  }
  const blocks: string[] = [];
  for (const block of visible(message.content, model, USER_IMAGE_NOTE)) {
    if (block.type === "image") blocks.push(imageBlock(block));
    else if (withoutLoneSurrogates(block.text).trim().length > 0) blocks.push(textBlock(block.text));
  }
  if (blocks.length === 0) return { model: key, role: "user", message: undefined, blocks: undefined };
  return { model: key, role: "user", message: `{"role":"user","content":[${blocks.join(",")}]}`, blocks };
}

function assistantEntry(message: AssistantMessage, model: Model<Api>, key: string): Entry {
  const failed = message.stopReason === "error" || message.stopReason === "aborted";
  const sameModel =
    message.provider === model.provider && message.api === model.api && message.model === model.id;
  const blocks: string[] = [];
  const calls: { id: string; sent: string; name: string }[] = [];
  for (const block of message.content) {
    if (block.type === "text") {
      if (block.text.trim().length > 0) blocks.push(textBlock(block.text));
    } else if (block.type === "thinking") {
      if (block.redacted) {
        // Opaque, and meaningful only to the model that wrote it.
        if (sameModel) blocks.push(json({ type: "redacted_thinking", data: block.thinkingSignature }));
      } else if ((block.thinking ?? "").trim().length === 0) {
        continue;
      } else if (sameModel && block.thinkingSignature && block.thinkingSignature.trim().length > 0) {
        blocks.push(
          json({
            type: "thinking",
            thinking: withoutLoneSurrogates(block.thinking),
            signature: block.thinkingSignature,
          }),
        );
      } else {
        // Without its signature (another model's, or cut short) it can only be replayed as text.
        blocks.push(textBlock(block.thinking));
      }
    } else if (block.type === "toolCall") {
      const sent = sameModel ? block.id : anthropicToolId(block.id);
      calls.push({ id: block.id, sent, name: block.name });
      blocks.push(json({ type: "tool_use", id: sent, name: block.name, input: block.arguments ?? {} }));
    }
  }
  // An answer that is a single text goes as a plain string, the shortest form (as user text does).
  const texts = message.content.filter((block) => block.type === "text" && block.text.trim().length > 0);
  const text =
    blocks.length === 1 && texts.length === 1
      ? json({ role: "assistant", content: withoutLoneSurrogates((texts[0] as TextContent).text) })
      : blocks.length > 0
        ? `{"role":"assistant","content":[${blocks.join(",")}]}`
        : undefined;
  return { model: key, role: "assistant", message: text, failed, calls };
}

function toolResultContent(message: ToolResultMessage, model: Model<Api>): unknown {
  const content = visible(message.content, model, TOOL_IMAGE_NOTE);
  if (!content.some((block) => block.type === "image")) {
    return withoutLoneSurrogates(content.map((block) => (block as TextContent).text).join("\n"));
  }
  const blocks: unknown[] = content.map((block) =>
    block.type === "text"
      ? { type: "text", text: withoutLoneSurrogates(block.text) }
      : { type: "image", source: { type: "base64", media_type: block.mimeType, data: block.data } },
  );
  if (!content.some((block) => block.type === "text"))
    blocks.unshift({ type: "text", text: "(see attached image)" });
  return blocks;
}

function toolResultBlock(message: ToolResultMessage, model: Model<Api>, id: string): string {
  // `is_error` is false unless said (the shortest form).
  return json({
    type: "tool_result",
    tool_use_id: id,
    content: toolResultContent(message, model),
    ...(message.isError ? { is_error: true } : {}),
  });
}

/** A block with the cache breakpoint added as its last key (a block's JSON ends with "}"). */
function marked(block: string, cacheControl: CacheControl): string {
  return `${block.slice(0, -1)},"cache_control":${json(cacheControl)}}`;
}

/** Where a request's conversion can resume next time: after a final answer, all state settled. */
interface Checkpoint {
  key: string;
  /** The messages up to it (compared by identity). */
  messages: Message[];
  /** Their JSON, comma-separated, without the brackets. */
  bytes: Buffer;
  renamed: Map<string, string>;
}

const COMMA = Buffer.from(",");
const OPEN = Buffer.from("[");
const CLOSE = Buffer.from("]");

/**
 * Converts histories for one model, keeping each message's JSON between requests. Messages are
 * kept by identity (a WeakMap): the history's objects are reused from turn to turn, and a message
 * that is rebuilt is simply converted again. The encoded history up to the last final answer is
 * kept too: the next request, which repeats it and adds a few messages, encodes only those.
 */
export class MessageWire {
  private readonly entries = new WeakMap<Message, Entry>();
  private checkpoint: Checkpoint | undefined;

  /** The `messages` array of a request, as JSON bytes. */
  messagesJson(messages: Message[], model: Model<Api>, cacheControl: CacheControl | undefined): Buffer {
    const key = `${model.provider}\n${model.api}\n${model.id}\n${model.input.join(",")}`;
    const resumed = this.resume(messages, key);
    const out: string[] = [];
    /** The last message written is a user message with these blocks (for the cache breakpoint). */
    let lastUser: { blocks: string[] } | { text: string } | undefined;
    let results: string[] = [];
    let pending: { sent: string; name: string }[] = [];
    let answered = new Set<string>();
    /** Ids another model's calls were renamed to, for their results. */
    const renamed = new Map(resumed?.renamed);
    /** The latest point to resume from next time: messages consumed and messages written. */
    let settled: { count: number; written: number; renamed: Map<string, string> } | undefined;

    const closeCalls = () => {
      for (const call of pending) {
        if (!answered.has(call.sent))
          results.push(
            json({ type: "tool_result", tool_use_id: call.sent, content: NO_RESULT, is_error: true }),
          );
      }
      pending = [];
      answered = new Set();
    };
    const flushResults = () => {
      if (results.length === 0) return;
      out.push(`{"role":"user","content":[${results.join(",")}]}`);
      lastUser = { blocks: results };
      results = [];
    };

    for (let i = resumed?.messages.length ?? 0; i < messages.length; i++) {
      const message = messages[i] as Message;
      const entry = this.entry(message, model, key);
      if (entry.role === "toolResult") {
        const result = message as ToolResultMessage;
        const id = renamed.get(result.toolCallId) ?? result.toolCallId;
        answered.add(id);
        results.push(id === result.toolCallId ? entry.block : toolResultBlock(result, model, id));
        continue;
      }
      closeCalls();
      if (entry.role === "assistant") {
        for (const call of entry.calls) if (call.sent !== call.id) renamed.set(call.id, call.sent);
        if (entry.failed) continue;
        if (entry.calls.length > 0) pending = entry.calls;
        flushResults();
        if (entry.message) {
          out.push(entry.message);
          lastUser = undefined;
          // A final answer: nothing is pending after it, whatever follows.
          if (entry.calls.length === 0 && i < messages.length - 1)
            settled = { count: i + 1, written: out.length, renamed: new Map(renamed) };
        }
        continue;
      }
      flushResults();
      if (entry.message) {
        out.push(entry.message);
        lastUser = entry.blocks ? { blocks: entry.blocks } : { text: entry.text ?? "" };
      }
    }
    closeCalls();
    flushResults();

    if (cacheControl && lastUser) {
      const blocks =
        "text" in lastUser
          ? [json({ type: "text", text: lastUser.text, cache_control: cacheControl })]
          : [...lastUser.blocks.slice(0, -1), marked(lastUser.blocks.at(-1) as string, cacheControl)];
      out[out.length - 1] = `{"role":"user","content":[${blocks.join(",")}]}`;
    }

    const before = resumed?.bytes ?? Buffer.alloc(0);
    const head = Buffer.from(out.slice(0, settled?.written ?? 0).join(","));
    const tail = Buffer.from(out.slice(settled?.written ?? 0).join(","));
    const parts = [before, head, tail].filter((part) => part.length > 0);
    if (settled) {
      const kept = [before, head].filter((part) => part.length > 0);
      this.checkpoint = {
        key,
        messages: messages.slice(0, settled.count),
        bytes: Buffer.concat(kept.flatMap((part, i) => (i === 0 ? [part] : [COMMA, part]))),
        renamed: settled.renamed,
      };
    }
    return Buffer.concat([OPEN, ...parts.flatMap((part, i) => (i === 0 ? [part] : [COMMA, part])), CLOSE]);
  }

  /** The kept checkpoint, when `messages` starts with the very messages it was made of. */
  private resume(messages: Message[], key: string): Checkpoint | undefined {
    const kept = this.checkpoint;
    if (!kept || kept.key !== key || kept.messages.length >= messages.length) return undefined;
    for (let i = 0; i < kept.messages.length; i++) if (kept.messages[i] !== messages[i]) return undefined;
    return kept;
  }

  private entry(message: Message, model: Model<Api>, key: string): Entry {
    const known = this.entries.get(message);
    if (known?.model === key) return known;
    const entry =
      message.role === "user"
        ? userEntry(message, model, key)
        : message.role === "assistant"
          ? assistantEntry(message, model, key)
          : {
              model: key,
              role: "toolResult" as const,
              block: toolResultBlock(message, model, message.toolCallId),
            };
    this.entries.set(message, entry);
    return entry;
  }
}
