export * from "./atomic.js";
export * from "./no-follow.js";
export * from "./paths.js";
export * from "./tree.js";
export * from "./output-files.js";
export * from "./tar.js";
