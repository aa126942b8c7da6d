/**
 * The Messages API's streamed answer (server-sent events) turned into pi-ai's assistant message
 * and its events, as pi-ai's Anthropic provider does it: the same blocks, usage and cost, stop
 * reasons and error texts. A tool call's arguments are parsed once, when the call is complete
 * (pi-ai parses them again at every fragment, for interfaces that show a call as it is written;
 * nothing here looks before the end).
 */
import {
  calculateCost,
  parseJsonWithRepair,
  parseStreamingJson,
  type Api,
  type AssistantMessage,
  type AssistantMessageEventStream,
  type Model,
  type StopReason,
} from "@mariozechner/pi-ai";

/** The events of a message; others (ping) are skipped. */
const MESSAGE_EVENTS = new Set([
  "message_start",
  "message_delta",
  "message_stop",
  "content_block_start",
  "content_block_delta",
  "content_block_stop",
]);

type Block = AssistantMessage["content"][number] & { index?: number; partialJson?: string };

interface Usage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

interface StreamEvent {
  type: string;
  index?: number;
  message?: { id?: string; usage?: Usage };
  content_block?: {
    type: string;
    id?: string;
    name?: string;
    input?: Record<string, unknown>;
    data?: string;
  };
  delta?: {
    type?: string;
    text?: string;
    thinking?: string;
    partial_json?: string;
    signature?: string;
    stop_reason?: string | null;
  };
  usage?: Usage;
}

function stopReasonOf(reason: string): StopReason {
  switch (reason) {
    case "end_turn":
    case "pause_turn":
    case "stop_sequence":
      return "stop";
    case "max_tokens":
      return "length";
    case "tool_use":
      return "toolUse";
    case "refusal":
    case "sensitive":
      return "error";
    default:
      throw new Error(`Unhandled stop reason: ${reason}`);
  }
}

/** A new assistant message for `model`, before anything arrived. */
export function emptyAnswer(model: Model<Api>): AssistantMessage {
  return {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: "stop",
    timestamp: Date.now(),
  };
}

/** Applies the events of one answer to `output` and reports them on `stream`. */
export class AnswerBuilder {
  private sawStart = false;
  private sawStop = false;

  constructor(
    private readonly model: Model<Api>,
    private readonly output: AssistantMessage,
    private readonly stream: AssistantMessageEventStream,
  ) {}

  /** One server-sent event. Throws on an error event, an unreadable one or an unknown stop reason. */
  event(name: string | undefined, data: string, raw: string[]): void {
    if (name === "error") throw new Error(data);
    if (!MESSAGE_EVENTS.has(name ?? "")) return;
    let event: StreamEvent;
    try {
      event = parseJsonWithRepair(data) as StreamEvent;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(
        `Could not parse Anthropic SSE event ${name}: ${message}; data=${data}; raw=${raw.join("\\n")}`,
      );
    }
    if (event.type === "message_start") this.sawStart = true;
    else if (event.type === "message_stop") this.sawStop = true;
    this.apply(event);
  }

  /** The stream ended: it must have ended the message it started. */
  end(): void {
    if (this.sawStart && !this.sawStop) throw new Error("Anthropic stream ended before message_stop");
  }

  /** After a failure: what the history keeps of half-built blocks. */
  static tidy(output: AssistantMessage): void {
    for (const block of output.content as Block[]) {
      delete block.index;
      delete block.partialJson;
    }
  }

  private apply(event: StreamEvent): void {
    const { output, stream } = this;
    const blocks = output.content as Block[];
    if (event.type === "message_start") {
      output.responseId = event.message?.id;
      const usage = event.message?.usage ?? {};
      output.usage.input = usage.input_tokens || 0;
      output.usage.output = usage.output_tokens || 0;
      output.usage.cacheRead = usage.cache_read_input_tokens || 0;
      output.usage.cacheWrite = usage.cache_creation_input_tokens || 0;
      this.costs();
    } else if (event.type === "content_block_start") {
      const start = event.content_block;
      let block: Block;
      let type: "text_start" | "thinking_start" | "toolcall_start";
      if (start?.type === "text") {
        block = { type: "text", text: "", index: event.index };
        type = "text_start";
      } else if (start?.type === "thinking") {
        block = { type: "thinking", thinking: "", thinkingSignature: "", index: event.index };
        type = "thinking_start";
      } else if (start?.type === "redacted_thinking") {
        block = {
          type: "thinking",
          thinking: "[Reasoning redacted]",
          thinkingSignature: start.data ?? "",
          redacted: true,
          index: event.index,
        };
        type = "thinking_start";
      } else if (start?.type === "tool_use") {
        block = {
          type: "toolCall",
          id: start.id ?? "",
          name: start.name ?? "",
          arguments: start.input ?? {},
          partialJson: "",
          index: event.index,
        };
        type = "toolcall_start";
      } else return;
      blocks.push(block);
      stream.push({ type, contentIndex: blocks.length - 1, partial: output });
    } else if (event.type === "content_block_delta") {
      const at = blocks.findIndex((block) => block.index === event.index);
      const block = blocks[at];
      const delta = event.delta ?? {};
      if (!block) return;
      if (delta.type === "text_delta" && block.type === "text") {
        block.text += delta.text ?? "";
        stream.push({ type: "text_delta", contentIndex: at, delta: delta.text ?? "", partial: output });
      } else if (delta.type === "thinking_delta" && block.type === "thinking") {
        block.thinking += delta.thinking ?? "";
        stream.push({
          type: "thinking_delta",
          contentIndex: at,
          delta: delta.thinking ?? "",
          partial: output,
        });
      } else if (delta.type === "input_json_delta" && block.type === "toolCall") {
        block.partialJson = (block.partialJson ?? "") + (delta.partial_json ?? "");
        stream.push({
          type: "toolcall_delta",
          contentIndex: at,
          delta: delta.partial_json ?? "",
          partial: output,
        });
      } else if (delta.type === "signature_delta" && block.type === "thinking") {
        block.thinkingSignature = (block.thinkingSignature ?? "") + (delta.signature ?? "");
      }
    } else if (event.type === "content_block_stop") {
      const at = blocks.findIndex((block) => block.index === event.index);
      const block = blocks[at];
      if (!block) return;
      delete block.index;
      if (block.type === "text") {
        stream.push({ type: "text_end", contentIndex: at, content: block.text, partial: output });
      } else if (block.type === "thinking") {
        stream.push({ type: "thinking_end", contentIndex: at, content: block.thinking, partial: output });
      } else if (block.type === "toolCall") {
        block.arguments = parseStreamingJson(block.partialJson ?? "");
        delete block.partialJson;
        stream.push({ type: "toolcall_end", contentIndex: at, toolCall: block, partial: output });
      }
    } else if (event.type === "message_delta") {
      if (event.delta?.stop_reason) output.stopReason = stopReasonOf(event.delta.stop_reason);
      // A field the proxy left out keeps what message_start said.
      const usage = event.usage ?? {};
      if (usage.input_tokens != null) output.usage.input = usage.input_tokens;
      if (usage.output_tokens != null) output.usage.output = usage.output_tokens;
      if (usage.cache_read_input_tokens != null) output.usage.cacheRead = usage.cache_read_input_tokens;
      if (usage.cache_creation_input_tokens != null)
        output.usage.cacheWrite = usage.cache_creation_input_tokens;
      this.costs();
    }
  }

  private costs(): void {
    const usage = this.output.usage;
    usage.totalTokens = usage.input + usage.output + usage.cacheRead + usage.cacheWrite;
    calculateCost(this.model, usage);
  }
}

/**
 * Splits a server-sent event stream into events (lines ended by CR, LF or CRLF; `event:` and
 * `data:` fields; comments skipped), calling `onEvent` for each.
 */
export class SseDecoder {
  private buffer = "";
  private name: string | undefined;
  private data: string[] = [];
  private raw: string[] = [];

  constructor(private readonly onEvent: (name: string | undefined, data: string, raw: string[]) => void) {}

  push(text: string): void {
    this.buffer += text;
    let start = 0;
    for (;;) {
      const lf = this.buffer.indexOf("\n", start);
      const cr = this.buffer.indexOf("\r", start);
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
      // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
      if (end === -1 || (end === cr && end === this.buffer.length - 1)) break;
      this.line(this.buffer.slice(start, end));
      start = end + (this.buffer[end] === "\r" && this.buffer[end + 1] === "\n" ? 2 : 1);
    }
    this.buffer = this.buffer.slice(start);
  }

  /** The stream ended: whatever is left is a last line and a last event. */
  end(): void {
    if (this.buffer.length > 0) this.line(this.buffer.replace(/\r$/, ""));
    this.buffer = "";
    this.dispatch();
  }

  private line(line: string): void {
    if (line === "") {
      this.dispatch();
      return;
    }
    this.raw.push(line);
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.name = value;
    else if (field === "data") this.data.push(value);
  }

  private dispatch(): void {
    if (this.name === undefined && this.data.length === 0) {
      this.raw = [];
      return;
    }
    const { name, data, raw } = this;
    this.name = undefined;
    this.data = [];
    this.raw = [];
    this.onEvent(name, data.join("\n"), raw);
  }
}
