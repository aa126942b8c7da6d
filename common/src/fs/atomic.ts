import { open, rename, rm } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { constants } from "node:fs";

/** A Unix owner to give a file to. */
export interface Owner {
  uid: number;
  gid: number;
}

/**
 * Replaces `path` atomically: writes a fresh temp file beside it (O_EXCL, so never through a
 * symlink), hands it to `owner`, then renames it over the target. A symlink at `path` is replaced
 * itself, never followed.
 */
export async function writeFileAtomic(
  path: string,
  data: string,
  owner?: Owner,
  mode = 0o600,
): Promise<void> {
  const temp = join(dirname(path), `.tmp-${randomUUID()}`);
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode);
    if (owner) await handle.chown(owner.uid, owner.gid);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}
