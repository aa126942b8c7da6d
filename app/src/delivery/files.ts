import { copyFile, mkdir, rm } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { basename, extname, join } from "node:path";

/**
 * The deliveries keep their own copy of every attachment, taken when the message is queued: the
 * recipient gets the file as it was then, even if it is changed, moved or cleaned up before a
 * delayed send. The copy is removed once its delivery is settled.
 */
export class DeliveryFiles {
  constructor(private readonly dir: string) {}

  async take(path: string): Promise<{ path: string; name: string }> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const name = basename(path);
    const copy = join(this.dir, `${randomUUID()}${extname(name).slice(0, 16)}`);
    await copyFile(path, copy);
    return { path: copy, name };
  }

  async discard(path: string): Promise<void> {
    await rm(path, { force: true });
  }
}
