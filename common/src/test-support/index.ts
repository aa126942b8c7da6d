export * from "./fake-llm.js";
export * from "./fake-anthropic.js";
export * from "./fake-openai.js";
export * from "./net.js";
