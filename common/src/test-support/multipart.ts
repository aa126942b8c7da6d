import type { IncomingMessage } from "node:http";
import busboy from "busboy";

/** A file uploaded in a multipart request. */
export interface MultipartFile {
  field: string;
  fileName: string;
  mimeType: string;
  data: Buffer;
}

/**
 * Reads a multipart (or urlencoded) form body as the fakes' real counterparts do: its fields and
 * every file, each read to the end.
 */
export function readMultipart(
  req: IncomingMessage,
): Promise<{ fields: Record<string, string>; files: MultipartFile[] }> {
  return new Promise((resolve, reject) => {
    const fields: Record<string, string> = {};
    const files: MultipartFile[] = [];
    const pending: Promise<void>[] = [];
    const form = busboy({ headers: req.headers });
    form.on("field", (name, value) => void (fields[name] = value));
    form.on("file", (field, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      pending.push(
        new Promise((done) =>
          stream.on("end", () => {
            files.push({
              field,
              fileName: info.filename ?? "",
              mimeType: info.mimeType,
              data: Buffer.concat(chunks),
            });
            done();
          }),
        ),
      );
    });
    form.on("close", () => void Promise.all(pending).then(() => resolve({ fields, files })));
    form.on("error", reject);
    req.pipe(form);
  });
}
