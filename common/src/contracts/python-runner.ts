import { z } from "zod";
import { transportedFileSchema } from "./plugin-runner.js";
import { RUN_FILES_LIMIT_BYTES, decodeBase64, safeFilename } from "./wire.js";

/**
 * Wire contract of the python-runner service (internal port 3004, `Authorization: Bearer <internal
 * secret>` on every route but `GET /health`). The runner validates requests with these schemas and
 * the app's `run_python` tool parses responses with them.
 */

const MB = 1024 * 1024;

/** Decoded size of the files given to one run, in total (413 beyond it); also the cap on returned files. */
export const PYTHON_FILES_LIMIT_BYTES = RUN_FILES_LIMIT_BYTES;
/** `POST /run` body: 25 MB of files in base64 (4/3 of it) plus room for the code. */
export const PYTHON_RUN_BODY_LIMIT_BYTES = 36 * MB;
/** At most this many input files, and this many output files returned. */
export const PYTHON_MAX_FILES = 100;
export const PYTHON_MAX_DEPENDENCIES = 50;

/**
 * A plausible PEP 508 requirement: a package name, optional extras, then version specifiers, a
 * marker or `@ url` in characters that cannot leave the TOML string of the PEP 723 header (no
 * quotes, backslashes or line breaks). `numpy`, `requests[socks]>=2.31`, `pandas==2.*`.
 */
const REQUIREMENT =
  /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\s*\[[A-Za-z0-9._,\s-]*\])?(?:\s*[<>=!~;@(][A-Za-z0-9 ._*+!<>=~,;:@/()%&?#[\]-]*)?$/;

export const requirementSchema = z
  .string()
  .max(200)
  .regex(REQUIREMENT, 'must be a package requirement such as "numpy" or "requests>=2.31" (no quotes)');

/** An input file: a plain file name and its base64 content, decoded here. */
export const pythonInputFileSchema = z.object({
  filename: z.string().refine((name) => safeFilename(name) !== undefined, "must be a plain file name"),
  data: z.string().transform((data, ctx) => {
    const decoded = decodeBase64(data);
    if (decoded === undefined) {
      ctx.addIssue({ code: "custom", message: "must be base64" });
      return z.NEVER;
    }
    return decoded;
  }),
});

/** `POST /run`: `files[].data` is base64 on the wire and a Buffer once parsed. */
export const pythonRunRequestSchema = z.object({
  code: z.string(),
  dependencies: z.array(requirementSchema).max(PYTHON_MAX_DEPENDENCIES).optional(),
  files: z
    .array(pythonInputFileSchema)
    .max(PYTHON_MAX_FILES)
    .optional()
    .refine(
      (files) => new Set(files?.map((file) => file.filename)).size === (files?.length ?? 0),
      "file names must be distinct",
    ),
});
/** What the app sends. */
export type PythonRunRequest = z.input<typeof pythonRunRequestSchema>;
/** What the runner works with (decoded files). */
export type PythonRunInput = z.output<typeof pythonRunRequestSchema>;

/**
 * 200 `{output, files}` whatever the script did: its exit code, a timeout or a failure to start
 * are part of `output` (the reference's text). HTTP errors are kept for requests it refuses.
 */
export const pythonRunResponseSchema = z.object({
  output: z.string(),
  files: z.array(transportedFileSchema),
});
export type PythonRunResponse = z.infer<typeof pythonRunResponseSchema>;
