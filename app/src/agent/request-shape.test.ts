import { describe, expect, it } from "vitest";
import type {
  AssistantMessage,
  Context,
  Message,
  Tool,
  ToolResultMessage,
  UserMessage,
} from "@mariozechner/pi-ai";
import { Type } from "@mariozechner/pi-ai";
import { RequestShaper } from "./request-shape.js";

const tool = (name: string): Tool => ({ name, description: name, parameters: Type.Object({}) });
const TOOLS = ["execute_sql", "manage_pages", "run_python", "load_tools"].map(tool);

const user = (text: string): UserMessage => ({ role: "user", content: text, timestamp: 0 });
const call = (name: string, args: Record<string, unknown>): AssistantMessage =>
  ({
    role: "assistant",
    content: [{ type: "toolCall", id: `call-${name}`, name, arguments: args }],
    stopReason: "toolUse",
  }) as AssistantMessage;
const result = (text: string): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: "call",
  toolName: "execute_sql",
  content: [{ type: "text", text }],
  isError: false,
  timestamp: 0,
});

const names = (context: Context) => context.tools?.map((t) => t.name);

describe("RequestShaper", () => {
  it("leaves a context without load_tools, or with the option off, as it is", () => {
    const context: Context = { messages: [user("hi")], tools: TOOLS.filter((t) => t.name !== "load_tools") };
    expect(new RequestShaper({ toolsOnDemand: true, earlierResultChars: 600 }).shape(context)).toBe(context);
    const full: Context = { messages: [user("hi")], tools: TOOLS };
    expect(new RequestShaper({ toolsOnDemand: false, earlierResultChars: 0 }).shape(full)).toBe(full);
  });

  it("offers on-demand tools once loaded or called, and the same list object while unchanged", () => {
    const shaper = new RequestShaper({ toolsOnDemand: true, earlierResultChars: 0 });
    const messages: Message[] = [user("hi")];
    const first = shaper.shape({ messages, tools: TOOLS });
    expect(names(first)).toEqual(["execute_sql", "load_tools"]);
    expect(shaper.shape({ messages: [...messages], tools: TOOLS }).tools).toBe(first.tools);

    messages.push(call("load_tools", { names: ["run_python", 7, "nonsense"] }));
    expect(names(shaper.shape({ messages, tools: TOOLS }))).toEqual([
      "execute_sql",
      "run_python",
      "load_tools",
    ]);
    messages.push(call("manage_pages", { action: "help" }));
    expect(names(shaper.shape({ messages, tools: TOOLS }))).toEqual(TOOLS.map((t) => t.name));
    // A lone name loads it (the arguments' check makes it a list); other shapes load nothing.
    const lone = [user("hi"), call("load_tools", { names: "run_python" })];
    expect(names(shaper.shape({ messages: lone, tools: TOOLS }))).toEqual([
      "execute_sql",
      "run_python",
      "load_tools",
    ]);
    const odd = [user("hi"), call("load_tools", { names: { run_python: true } })];
    expect(names(shaper.shape({ messages: odd, tools: TOOLS }))).toEqual(["execute_sql", "load_tools"]);
  });

  it("offers the plugin tools on demand while the system prompt lists no plugin, always once it lists one", () => {
    const shaper = new RequestShaper({ toolsOnDemand: true, earlierResultChars: 0 });
    const tools = ["execute_sql", "manage_plugins", "run_plugin_tool", "load_tools"].map(tool);
    const none: Context = { systemPrompt: "You are Stavrobot.", messages: [user("hi")], tools };
    expect(names(shaper.shape(none))).toEqual(["execute_sql", "load_tools"]);
    const loaded = [user("install it"), call("load_tools", { names: ["manage_plugins"] })];
    expect(names(shaper.shape({ ...none, messages: loaded }))).toEqual([
      "execute_sql",
      "manage_plugins",
      "load_tools",
    ]);
    const listed: Context = {
      ...none,
      systemPrompt: "You are Stavrobot.\n\nAvailable plugins:\n- weather: Forecasts.",
    };
    expect(names(shaper.shape(listed))).toEqual(tools.map((t) => t.name));
  });

  it("shortens long results of earlier turns only, once, at a line's end and never inside a pair", () => {
    const shaper = new RequestShaper({ toolsOnDemand: false, earlierResultChars: 100 });
    const lines = Array.from({ length: 30 }, (_, i) => `line ${i} ${"x".repeat(10)}`).join("\n");
    const old = result(lines);
    const small = result("short");
    const current = result(lines);
    const messages = [
      user("a"),
      call("execute_sql", {}),
      old,
      call("execute_sql", {}),
      small,
      user("b"),
      call("execute_sql", {}),
      current,
    ];
    const shaped = shaper.shape({ messages });
    expect(shaped.messages).not.toBe(messages);
    const short = shaped.messages[2] as ToolResultMessage;
    const text = (short.content[0] as { text: string }).text;
    expect(text).toMatch(/^line 0 x+\nline 1 x+\nline 2 x+\n\[\d+ more characters left out/);
    expect(shaped.messages[4]).toBe(small);
    expect(shaped.messages[7]).toBe(current);
    expect(messages[2]).toBe(old);
    expect(shaper.shape({ messages: [...messages] }).messages[2]).toBe(short);

    const emoji = result("😀".repeat(100));
    const cut = shaper.shape({ messages: [user("a"), emoji, user("b")] }).messages[1] as ToolResultMessage;
    const head = (cut.content[0] as { text: string }).text.split("\n")[0] as string;
    expect(head).toBe("😀".repeat(25));
  });
});
