import { describe, expect, it } from "vitest";
import { leanPayload } from "./payload.js";

describe("leanPayload", () => {
  it("drops eager_input_streaming from every tool and keeps everything else in order", () => {
    const payload = {
      model: "claude-sonnet-4-5",
      tools: [
        { name: "a", description: "A.", eager_input_streaming: true, input_schema: { type: "object" } },
        {
          name: "b",
          description: "B.",
          eager_input_streaming: true,
          input_schema: { type: "object" },
          cache_control: { type: "ephemeral" },
        },
      ],
      messages: [{ role: "user", content: "hi" }],
    };
    const lean = leanPayload(payload) as typeof payload;
    expect(JSON.stringify(lean)).toBe(
      JSON.stringify(payload).replaceAll('"eager_input_streaming":true,', ""),
    );
    // The original is not changed (pi-ai may reuse it).
    expect(payload.tools[0]).toHaveProperty("eager_input_streaming", true);
  });

  it("returns requests without tools, or other shapes, as they are", () => {
    const plain = { model: "m", messages: [] };
    expect(leanPayload(plain)).toBe(plain);
    expect(leanPayload(undefined)).toBeUndefined();
    const openai = { model: "m", tools: [{ type: "function", function: { name: "a" } }] };
    expect(leanPayload(openai)).toBe(openai);
  });
});
