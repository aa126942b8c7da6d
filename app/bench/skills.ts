/**
 * What the skills list adds to a request: the app with 0, 10 and 100 approved skills (each with a
 * description of ~200 characters and a body of 4 KB, as real skills have), one chat each, and the
 * bytes of the request's system prompt and tool definitions against those with no skill. Only
 * names and the start of each description go into the prompt, within `[skills]` promptCount and
 * promptBytes (defaults 30 and 3 KB); the bodies never do.
 */
import { join } from "node:path";
import { startFakeAnthropic, textTurn } from "@stavrobot/common/test-support";
import { INTERNAL_SECRET, chat, configFor, post, startTestApp } from "../test/helpers/app.js";
import { SkillStore } from "../src/skills/store.js";
import { environment } from "./setup.js";

const COUNTS = [0, 10, 100];

interface RequestBytes {
  total: number;
  system: number;
  tools: number;
}

async function requestWith(skills: number): Promise<RequestBytes> {
  const fake = await startFakeAnthropic();
  const env = await environment("pglite", configFor(fake));
  const app = await startTestApp(env);
  try {
    const store = new SkillStore(app.db, join(env.dir, "skills"), INTERNAL_SECRET);
    for (let i = 0; i < skills; i++) {
      const name = `skill-${String(i).padStart(3, "0")}`;
      const description =
        `Keeps the owner's ${name} records: what to store, which page shows them, and which reminders to set. `
          .repeat(2)
          .trim();
      const text = `---\nname: ${name}\ndescription: ${description}\n---\n\n${"Step: do the next thing carefully.\n".repeat(120)}`;
      await store.install(
        {
          parsed: {
            name,
            description,
            format: "agent-skills",
            version: undefined,
            author: undefined,
            title: undefined,
            body: "",
          },
          files: new Map([["SKILL.md", Buffer.from(text)]]),
        },
        `https://example.org/skills/${name}.md`,
      );
      // Through the owner's API, as the Skills page approves (the prompt is composed again).
      const approved = await post(app.port, "/api/settings/skills/approve", { name });
      if (approved.status !== 200) throw new Error(`approving ${name}: ${JSON.stringify(approved.body)}`);
    }
    fake.enqueue(textTurn("Fine."));
    const before = fake.requests.length;
    const answer = await chat(app, "How is the weather?");
    if (answer.status !== 200) throw new Error(`chat answered ${answer.status}`);
    const request = fake.requests[before];
    if (!request) throw new Error("no request reached the model");
    return {
      total: Number(request.headers["content-length"] ?? 0),
      system: Buffer.byteLength(JSON.stringify(request.body.system ?? "")),
      tools: Buffer.byteLength(JSON.stringify(request.body.tools ?? [])),
    };
  } finally {
    await app.close();
    await fake.close();
    await env.cleanup();
  }
}

export async function skillsListBytes(): Promise<string[]> {
  const rows = ["Skills list: bytes a request carries for the approved skills (PGlite, default caps)"];
  let none: RequestBytes | undefined;
  for (const count of COUNTS) {
    const bytes = await requestWith(count);
    none ??= bytes;
    const added = bytes.system + bytes.tools - (none.system + none.tools);
    rows.push(
      `  ${String(count).padStart(3)} skills: +${added.toLocaleString("en")} B to a request ` +
        `(system prompt ${bytes.system.toLocaleString("en")} B, tools ${bytes.tools.toLocaleString("en")} B, ` +
        `request ${bytes.total.toLocaleString("en")} B)`,
    );
  }
  return rows;
}
