import {
  streamSimple,
  type Api,
  type AssistantMessageEventStream,
  type Context,
  type Model,
} from "@mariozechner/pi-ai";
import { AnthropicWire, type WireStreamOptions } from "./anthropic/client.js";
import { leanPayload } from "./payload.js";

/** One model call, answered as pi-ai's `streamSimple` answers it. */
export type ModelStream = (
  model: Model<Api>,
  context: Context,
  options: WireStreamOptions,
) => AssistantMessageEventStream;

/**
 * Every model call of the assistant: through the assistant's own Messages API client where it
 * serves the model and key (`AnthropicWire.handles`), through pi-ai's provider elsewhere (its
 * request trimmed by `leanPayload`). Either way `onRequest` is told when the request leaves.
 */
export function modelStreamVia(wire: AnthropicWire | undefined): ModelStream {
  return (model, context, options) => {
    if (wire && AnthropicWire.handles(model, options.apiKey)) return wire.stream(model, context, options);
    return streamSimple(model, context, {
      ...options,
      onPayload: async (payload, payloadModel) => {
        options.onRequest?.();
        return leanPayload((await options.onPayload?.(payload, payloadModel)) ?? payload);
      },
    });
  };
}
