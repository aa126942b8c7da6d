import {
  createAssistantMessageEventStream,
  type Api,
  type AssistantMessageEventStream,
  type Model,
} from "@mariozechner/pi-ai";
import { emptyAnswer } from "./anthropic/events.js";

/**
 * A model call that is not made (a used-up budget, a turn at its tool round cap), answered as
 * pi-agent-core's `StreamFn` contract asks: an answer ending in an error, on the stream. No request
 * leaves; the turn ends with `reason` as its error.
 */
export function refusedCall(model: Model<Api>, reason: string): AssistantMessageEventStream {
  const stream = createAssistantMessageEventStream();
  stream.push({
    type: "error",
    reason: "error",
    error: { ...emptyAnswer(model), stopReason: "error", errorMessage: reason },
  });
  stream.end();
  return stream;
}
