export * from "./process.js";
export * from "./sandbox.js";
export * from "./users.js";
