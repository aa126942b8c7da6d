import { describe, expect, it } from "vitest";
import { telegramEntitiesToMarkdown } from "./entities.js";
import type { TelegramEntity } from "./entities.js";

describe("telegramEntitiesToMarkdown", () => {
  const entity = (type: string, offset: number, length: number, extra: Partial<TelegramEntity> = {}) => ({
    type,
    offset,
    length,
    ...extra,
  });

  it("returns the text unchanged without entities", () => {
    expect(telegramEntitiesToMarkdown("plain *text*", undefined)).toBe("plain *text*");
    expect(telegramEntitiesToMarkdown("plain", [])).toBe("plain");
  });

  it("maps the formatting entities", () => {
    const text = "bold italic under strike code link spoil";
    const entities = [
      entity("bold", 0, 4),
      entity("italic", 5, 6),
      entity("underline", 12, 5),
      entity("strikethrough", 18, 6),
      entity("code", 25, 4),
      entity("text_link", 30, 4, { url: "https://e.com/x" }),
      entity("spoiler", 35, 5),
    ];
    expect(telegramEntitiesToMarkdown(text, entities)).toBe(
      "**bold** _italic_ under ~~strike~~ `code` [link](https://e.com/x) <spoiler>spoil</spoiler>",
    );
  });

  it("leaves mentions, URLs, hashtags and commands as they are", () => {
    const text = "@bob /start #tag https://e.com a@b.c";
    const entities = [
      entity("mention", 0, 4),
      entity("bot_command", 5, 6),
      entity("hashtag", 12, 4),
      entity("url", 17, 13),
      entity("email", 31, 5),
    ];
    expect(telegramEntitiesToMarkdown(text, entities)).toBe(text);
  });

  it("counts offsets in UTF-16 code units, past emoji and Greek text", () => {
    const text = "😀👍🏽 Γειά σου κόσμε!";
    // 😀 is 2 units, 👍🏽 is 4: "Γειά" starts at 7, "κόσμε" at 16.
    const entities = [entity("bold", 7, 4), entity("italic", 16, 5)];
    expect(telegramEntitiesToMarkdown(text, entities)).toBe("😀👍🏽 **Γειά** σου _κόσμε_!");
    expect(telegramEntitiesToMarkdown("a😀b", [entity("code", 1, 2)])).toBe("a`😀`b");
  });

  it("nests entities inside each other", () => {
    const text = "bold and italic inside";
    const entities = [entity("bold", 0, 22), entity("italic", 9, 6)];
    expect(telegramEntitiesToMarkdown(text, entities)).toBe("**bold and _italic_ inside**");
    const sameRange = [entity("italic", 0, 4), entity("bold", 0, 4)];
    expect(telegramEntitiesToMarkdown("both", sameRange)).toBe("_**both**_");
  });

  it("keeps markers paired when entities overlap without nesting", () => {
    const text = "one two three";
    const entities = [entity("bold", 0, 7), entity("italic", 4, 9)];
    expect(telegramEntitiesToMarkdown(text, entities)).toBe("**one _two_**_ three_");
  });

  it("moves whitespace at an entity's edges outside the markers", () => {
    expect(telegramEntitiesToMarkdown("a bold b", [entity("bold", 1, 6)])).toBe("a **bold** b");
    expect(telegramEntitiesToMarkdown("a   b", [entity("bold", 1, 3)])).toBe("a   b");
  });

  it("writes pre as a fenced block with its language, on its own lines", () => {
    const text = "Look: const x = 1;\nconsole.log(x) done";
    const entities = [entity("pre", 6, 27, { language: "js" })];
    expect(telegramEntitiesToMarkdown(text, entities)).toBe(
      "Look: \n```js\nconst x = 1;\nconsole.log(x)\n```\n done",
    );
  });

  it("lengthens fences around backticks in code", () => {
    expect(telegramEntitiesToMarkdown("x `y` z", [entity("code", 0, 7)])).toBe("``x `y` z``");
    expect(telegramEntitiesToMarkdown("```", [entity("pre", 0, 3)])).toBe("````\n```\n````");
  });

  it("wraps link targets that contain spaces or parentheses", () => {
    const entities = [entity("text_link", 0, 4, { url: "https://e.com/a_(b)" })];
    expect(telegramEntitiesToMarkdown("wiki", entities)).toBe("[wiki](<https://e.com/a_(b)>)");
  });

  it("prefixes every line of a blockquote", () => {
    const text = "Said:\nline one\nline two\nreply";
    expect(telegramEntitiesToMarkdown(text, [entity("blockquote", 6, 17)])).toBe(
      "Said:\n> line one\n> line two\n\nreply",
    );
  });

  it("ignores entities outside the text and never splits a surrogate pair", () => {
    expect(telegramEntitiesToMarkdown("hi", [entity("bold", 5, 3), entity("bold", 0, 0)])).toBe("hi");
    expect(telegramEntitiesToMarkdown("😀x", [entity("bold", 1, 2)])).toBe("**😀x**");
  });
});
