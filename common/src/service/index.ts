export * from "./env.js";
export * from "./run-service.js";
