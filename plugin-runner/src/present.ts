import type { BundleDetail } from "@stavrobot/common";
import type { Bundle } from "./bundles.js";
import type { ConfigValues } from "./plugin-config.js";
import { configStatus } from "./plugin-config.js";

export const MAX_INSTRUCTIONS_CHARS = 5_000;

export function truncateInstructions(text: string | undefined): string | undefined {
  if (text === undefined || text.trim().length === 0) return undefined;
  if (text.length <= MAX_INSTRUCTIONS_CHARS) return text;
  return text.slice(0, MAX_INSTRUCTIONS_CHARS) + "\n[Instructions truncated]";
}

/** What `GET /bundles/:name` shows: tools without entrypoints, config presence without values. */
export function bundleDetail(bundle: Bundle, values: ConfigValues): BundleDetail {
  const instructions = truncateInstructions(bundle.instructions);
  const config = configStatus(bundle, values);
  return {
    name: bundle.name,
    description: bundle.description,
    editable: bundle.editable,
    tools: bundle.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      async: tool.async,
      parameters: tool.parameters,
    })),
    ...(instructions !== undefined ? { instructions } : {}),
    ...(config !== undefined ? { config } : {}),
  };
}
