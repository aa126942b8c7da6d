import { describe, expect, it } from "vitest";
import { PROMPT_USAGE, parsePromptCommand } from "./prompt-command.js";

describe("the owner's /prompt command", () => {
  it("reads the server, the prompt and key=value arguments, quoted values keeping their spaces", () => {
    expect(
      parsePromptCommand('notes summarise topic="sea tides" depth=2 empty= say="a \\"b\\" \\\\c"'),
    ).toEqual({
      server: "notes",
      name: "summarise",
      args: { topic: "sea tides", depth: "2", empty: "", say: 'a "b" \\c' },
    });
    expect(parsePromptCommand("  notes   summarise  ")).toEqual({
      server: "notes",
      name: "summarise",
      args: {},
    });
    expect(parsePromptCommand('notes "two words"')).toEqual({ server: "notes", name: "two words", args: {} });
    expect(parsePromptCommand("notes greet note=a=b")).toMatchObject({ args: { note: "a=b" } });
  });

  it("refuses what it cannot read, saying how it is written", () => {
    expect(parsePromptCommand("")).toEqual({ error: PROMPT_USAGE });
    expect(parsePromptCommand("notes")).toEqual({ server: "notes", name: undefined, args: {} });
    expect(parsePromptCommand("notes greet Ada")).toEqual({
      error: `"Ada" is not key=value. ${PROMPT_USAGE}`,
    });
    expect(parsePromptCommand("notes greet =Ada")).toEqual({
      error: `"=Ada" is not key=value. ${PROMPT_USAGE}`,
    });
    expect(parsePromptCommand("notes greet a=1 a=2")).toEqual({ error: 'The argument "a" is given twice.' });
    expect(parsePromptCommand('notes greet a="open')).toEqual({
      error: `A double quote is not closed. ${PROMPT_USAGE}`,
    });
    expect(parsePromptCommand("../etc greet")).toEqual({ error: 'No MCP server "../etc" is declared.' });
  });
});
