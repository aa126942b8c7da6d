export * from "./env.js";
export * from "./run-service.js";
export * from "./listen.js";
