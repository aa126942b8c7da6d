/**
 * Trims what pi-ai adds to a provider request that the assistant has no use for, before it is sent.
 *
 * Anthropic's per-tool `eager_input_streaming` streams a tool call's arguments unvalidated as the
 * model writes them, for interfaces that show a call while it is written. Turns here wait for the
 * whole call anyway, and the flag costs about 30 bytes per tool in every request (some 460 B with
 * every tool registered). Without it the API streams validated arguments, its default.
 */
export function leanPayload(payload: unknown): unknown {
  if (typeof payload !== "object" || payload === null || !("tools" in payload)) return payload;
  const { tools } = payload;
  if (!Array.isArray(tools) || !tools.some((tool) => isRecord(tool) && "eager_input_streaming" in tool)) {
    return payload;
  }
  return {
    ...payload,
    tools: tools.map((tool: unknown) => {
      if (!isRecord(tool) || !("eager_input_streaming" in tool)) return tool;
      const { eager_input_streaming: _dropped, ...rest } = tool;
      return rest;
    }),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
