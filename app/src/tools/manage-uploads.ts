import type { AgentTool } from "@mariozechner/pi-agent-core";
import { StringEnum, Type } from "@mariozechner/pi-ai";
import { lstat, readFile, rm } from "node:fs/promises";
import { extname } from "node:path";
import { FileAreaError, type FileAreas } from "../files/areas.js";
import {
  RESULT_LIMIT_BYTES,
  ToolError,
  capText,
  outsideDetails,
  textResult,
  unknownAction,
} from "./result.js";

const actions = ["read", "delete", "help"] as const;

const parameters = Type.Object({
  action: StringEnum(actions),
  path: Type.Optional(Type.String({ description: "The stored path of an upload." })),
});

const IMAGE_TYPES: Record<string, string> = {
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".gif": "image/gif",
  ".webp": "image/webp",
};
const TEXT_EXTENSIONS = new Set(
  "txt md csv json xml html css js ts py sh yml yaml toml ini cfg log sql env"
    .split(" ")
    .map((ext) => `.${ext}`),
);
const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

/**
 * Files people sent: read (images as images, text as text) or delete; confined to the agent's
 * uploads (the owner's agent: its own and its subagents').
 */
export function createManageUploadsTool(deps: { areas: FileAreas }): AgentTool<typeof parameters> {
  const { areas } = deps;
  const locate = async (path: string | undefined): Promise<string> => {
    if (!path?.trim()) throw new ToolError("This action needs 'path'.");
    let resolved: string;
    try {
      resolved = await areas.resolve(path, areas.uploads);
    } catch (error) {
      if (error instanceof FileAreaError) throw new ToolError(error.message);
      throw error;
    }
    if (!areas.isUpload(resolved)) throw new ToolError(`"${path}" is not an upload.`);
    const info = await lstat(resolved).catch(() => undefined);
    if (!info?.isFile()) throw new ToolError(`Upload not found: ${path}`);
    return resolved;
  };
  return {
    name: "manage_uploads",
    label: "Manage uploads",
    description:
      "Read or delete a file someone sent (its stored path is in the message). Use action 'help' for details.",
    parameters,
    async execute(_id, params) {
      switch (params.action) {
        case "help":
          return textResult(
            `manage_uploads reads or deletes files people sent, stored under ${areas.uploads}.\n` +
              "- read {path}: images come back as images, text files as text; other files cannot be read directly (pass them to a plugin or run_python instead).\n" +
              "- delete {path}.\n- help: this text.",
          );
        case "read": {
          const path = await locate(params.path);
          const ext = extname(path).toLowerCase();
          const image = IMAGE_TYPES[ext];
          if (image) {
            const data = await readFile(path);
            if (data.length > MAX_IMAGE_BYTES) throw new ToolError("The image is larger than 5 MB.");
            return {
              content: [{ type: "image", data: data.toString("base64"), mimeType: image }],
              details: outsideDetails(areas.outsideOrigin(path)),
            };
          }
          if (ext === "" || TEXT_EXTENSIONS.has(ext)) {
            const text = (await readFile(path)).toString("utf8");
            return textResult(
              capText(text, RESULT_LIMIT_BYTES, "Use manage_files read_lines for the rest."),
              outsideDetails(areas.outsideOrigin(path)),
            );
          }
          return textResult(
            `Cannot read binary file directly (${ext}). Pass its path to a plugin tool or run_python to process it.`,
          );
        }
        case "delete":
          await rm(await locate(params.path), { force: true });
          return textResult(`Deleted ${params.path}.`);
        default:
          throw unknownAction(String((params as { action: unknown }).action), actions);
      }
    },
  };
}
