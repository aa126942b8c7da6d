/**
 * A tool's failure, in words for the model (pi-agent-core turns a thrown error into an `is_error`
 * tool result). Its own module, since tools and the helpers they use (`plugins/`) both throw it.
 */
export class ToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolError";
  }
}
