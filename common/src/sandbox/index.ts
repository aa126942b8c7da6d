export * from "./process.js";
export * from "./sandbox.js";
export * from "./users.js";
export * from "./long-lived.js";
export * from "./json-lines.js";
export * from "./kept.js";
