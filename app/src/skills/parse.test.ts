import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseSkill } from "./parse.js";

const FIXTURES = join(import.meta.dirname, "..", "..", "test", "fixtures", "skills");

describe("reading a skill's text", () => {
  it("reads an Agent Skills SKILL.md, its version and author from metadata", () => {
    const skill = parseSkill(readFileSync(join(FIXTURES, "SKILL.md"), "utf8"), "SKILL.md");
    expect(skill).toMatchObject({
      name: "water-plants",
      format: "agent-skills",
      version: "1.2",
      author: "Stavrobot tests",
      description: "Remind the owner to water each plant on its own schedule.",
    });
    expect(skill.body).toContain("# Watering plants");
  });

  it("reads a skill page, named by its file", () => {
    const skill = parseSkill(readFileSync(join(FIXTURES, "reading-log.md"), "utf8"), "reading-log.md");
    expect(skill).toMatchObject({
      name: "reading-log",
      format: "skill-page",
      title: "Reading log",
      version: "3",
      author: "Stavrobot tests",
    });
    expect(skill.body).toContain("## Step 1: Create the tables");
  });

  it.each([
    ["no front matter", "# Just text\n", "x.md", "has no front matter"],
    ["bad YAML", "---\nname: [a\n---\nbody", "SKILL.md", "not valid YAML"],
    ["a list", "---\n- a\n---\n", "SKILL.md", "not a map of fields"],
    ["neither name nor title", "---\ndescription: d\n---\n", "SKILL.md", "neither 'name'"],
    ["a bad name", "---\nname: Bad_Name\ndescription: d\n---\n", "SKILL.md", "Field 'name' must be"],
    ["no description", "---\nname: ok\n---\n", "SKILL.md", "Field 'description' must be"],
    [
      "an unknown field",
      "---\nname: ok\ndescription: d\nrun: rm -rf\n---\n",
      "SKILL.md",
      "Unknown front matter field(s): run",
    ],
    [
      "metadata not texts",
      "---\nname: ok\ndescription: d\nmetadata:\n  version: 2\n---\n",
      "SKILL.md",
      "Field 'metadata'",
    ],
    ["a page without a title text", "---\ntitle: 3\ndescription: d\n---\n", "p.md", "Field 'title' must be"],
    [
      "a page with a bad version",
      "---\ntitle: T\ndescription: d\nversion: [1]\n---\n",
      "p.md",
      "Field 'version'",
    ],
    [
      "a page whose file name is no name",
      "---\ntitle: T\ndescription: d\n---\n",
      "My Page.md",
      "The skill's name (the file's name)",
    ],
  ])("refuses %s, naming what is wrong", (_case, text, file, message) => {
    expect(() => parseSkill(text, file)).toThrow(message);
  });

  it("refuses a text larger than 256 KB", () => {
    expect(() =>
      parseSkill(`---\nname: a\ndescription: d\n---\n${"x".repeat(300 * 1024)}`, "SKILL.md"),
    ).toThrow("larger than 256 KB");
  });
});
