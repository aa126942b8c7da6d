import { PLUGIN_FILES_LIMIT_BYTES } from "@stavrobot/common";

/** What one run of a plugin's tool may take: time, output, files handed back, processes. */
export interface Limits {
  syncTimeoutMs: number;
  asyncTimeoutMs: number;
  stdoutLimitBytes: number;
  stderrLimitBytes: number;
  /** Total size of the files a run may hand back. */
  outputFilesBytes: number;
  killGraceMs: number;
  /** Processes one plugin user may have at once (applied when runs switch user). */
  processes: number;
}

export const DEFAULT_LIMITS: Limits = {
  syncTimeoutMs: 30_000,
  asyncTimeoutMs: 5 * 60_000,
  stdoutLimitBytes: 1024 * 1024,
  stderrLimitBytes: 64 * 1024,
  outputFilesBytes: PLUGIN_FILES_LIMIT_BYTES,
  killGraceMs: 2_000,
  processes: 256,
};
