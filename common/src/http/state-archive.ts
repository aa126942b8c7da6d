import { existsSync, statSync } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { errorMessage } from "../errors.js";
import { tarDir, tarEnd, tarTree } from "../fs/tar.js";
import type { Logger } from "../logger.js";
import type { Router } from "./router.js";

/**
 * `GET /state-archive` (behind the internal secret, as every route of a sibling): a service's own
 * state as one tar stream, for the app's full backup where the app cannot read that state itself
 * (compose: each service keeps it in volumes of its own). Each part is archived under the name an
 * `npm start` data directory gives it, with its modes and links kept, so the backup has one layout
 * wherever it was taken.
 */
export const STATE_ARCHIVE_PATH = "/state-archive";

export interface StatePart {
  /** The name in the archive (`plugins`, `plugin-runner`…). */
  name: string;
  dir: string;
  /** Names (relative to `dir`) left out with what is under them: what can be made again. */
  skip?: (name: string) => boolean;
}

export function addStateArchiveRoute(router: Router, parts: StatePart[], logger: Logger): Router {
  return router.get(STATE_ARCHIVE_PATH, async ({ res }) => {
    res.writeHead(200, { "Content-Type": "application/x-tar", "Cache-Control": "no-store" });
    try {
      await pipeline(Readable.from(stateArchive(parts)), res);
    } catch (error) {
      // The reader sees a stream cut short (no end blocks) and fails its backup.
      logger.warn("the state archive stopped", { error: errorMessage(error) });
      res.destroy();
    }
    return undefined;
  });
}

async function* stateArchive(parts: StatePart[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) {
    if (!existsSync(part.dir)) continue;
    const info = statSync(part.dir);
    yield tarDir(part.name, info.mode & 0o777, Math.floor(info.mtimeMs / 1000));
    yield* tarTree(part.dir, { prefix: part.name, modes: "kept", ...(part.skip ? { skip: part.skip } : {}) });
  }
  yield tarEnd();
}
