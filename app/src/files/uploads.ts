import { randomUUID } from "node:crypto";
import { mkdir, realpath, rm, writeFile } from "node:fs/promises";
import { extname, join } from "node:path";
import type { Attachment } from "@stavrobot/common";

/** A file a message brought, in memory, before it is stored. */
export interface DecodedFile {
  data: Buffer;
  filename: string;
  mimeType: string;
}

/**
 * Stores a message's files in an agent's uploads under new names (the sender's name is kept as
 * the attachment's), all or none.
 */
export async function storeFiles(files: DecodedFile[], uploadsDir: string): Promise<Attachment[]> {
  if (files.length === 0) return [];
  await mkdir(uploadsDir, { recursive: true });
  const root = await realpath(uploadsDir);
  const stored: Attachment[] = [];
  try {
    for (const file of files) {
      const storedPath = join(root, `upload-${randomUUID()}${extname(file.filename).slice(0, 16)}`);
      await writeFile(storedPath, file.data, { flag: "wx", mode: 0o600 });
      stored.push({
        storedPath,
        originalFilename: file.filename,
        mimeType: file.mimeType,
        size: file.data.length,
      });
    }
  } catch (error) {
    await Promise.all(stored.map((file) => rm(file.storedPath, { force: true })));
    throw error;
  }
  return stored;
}

/** Removes stored files again (a message that was not saved after all). */
export async function removeFiles(files: Attachment[]): Promise<void> {
  await Promise.all(files.map((file) => rm(file.storedPath, { force: true })));
}
