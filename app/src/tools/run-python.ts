import { randomUUID } from "node:crypto";
import { lstat, mkdir, readFile, realpath, rename, rm, writeFile } from "node:fs/promises";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import {
  PYTHON_FILES_LIMIT_BYTES,
  PYTHON_MAX_FILES,
  ServiceError,
  errorBodyText,
  errorMessage,
  pythonRunResponseSchema,
  safeFilename,
  toSafeFilename,
} from "@stavrobot/common";
import type { PythonRunRequest, PythonRunResponse, ServiceClient, TransportedFile } from "@stavrobot/common";
import { RESULT_LIMIT_BYTES, ToolError, capText, textResult } from "./result.js";

const parameters = Type.Object({
  code: Type.String({ description: "Python 3 code. Print what you need to see." }),
  dependencies: Type.Optional(
    Type.Array(Type.String(), {
      description: 'PyPI packages to install first, e.g. ["numpy", "requests>=2.31"].',
    }),
  ),
  files: Type.Optional(
    Type.Array(Type.String(), {
      description: "Files for the code: paths in the files directory (or relative to it).",
    }),
  ),
});

/** The runner stops a script after 30 s; this leaves room for installing and transferring files. */
const RUN_TIMEOUT_MS = 60_000;

/**
 * `run_python`: runs code in the python-runner's sandbox. Input files come from the files
 * directory; the files the script writes to /tmp/run/output/ are saved to `<filesDir>/python/`
 * (emptied before each run) and listed after the output.
 */
export function createRunPythonTool(deps: {
  pythonRunner: ServiceClient;
  filesDir: string;
}): AgentTool<typeof parameters> {
  const outputDir = join(deps.filesDir, "python");
  return {
    name: "run_python",
    label: "Run Python",
    description:
      "Run Python 3 in a sandbox (30 s limit; network only with dependencies), in /tmp/run. Given files " +
      `are in /tmp/run/input/; files written to /tmp/run/output/ are saved to ${outputDir}/ (emptied on each run).`,
    parameters,
    async execute(_id, params, signal) {
      const files = await readInputFiles(params.files ?? [], deps.filesDir);
      await rm(outputDir, { recursive: true, force: true });
      const body: PythonRunRequest = { code: params.code, dependencies: params.dependencies ?? [], files };
      const data = await post(deps.pythonRunner, body, signal);
      let text = capText(data.output, RESULT_LIMIT_BYTES, "Print less, or write the full result to a file.");
      if (data.files.length > 0) {
        const saved = await saveFiles(data.files, outputDir);
        const list = saved.map((file) => `- ${file.path} (${file.size} bytes)`).join("\n");
        text = `${text.replace(/\n+$/, "")}\n\nOutput files:\n${list}`;
      }
      return textResult(text);
    },
  };
}

/** `POST /run`, once; a failure becomes a ToolError the model can read (an abort stays an abort). */
async function post(
  pythonRunner: ServiceClient,
  body: PythonRunRequest,
  signal?: AbortSignal,
): Promise<PythonRunResponse> {
  try {
    const answer = await pythonRunner.request("POST", "/run", {
      body,
      schema: pythonRunResponseSchema,
      timeoutMs: RUN_TIMEOUT_MS,
      ...(signal ? { signal } : {}),
    });
    return answer.data;
  } catch (error) {
    if (signal?.aborted) throw error;
    throw new ToolError(describeFailure(error));
  }
}

/** Reads the files the model named: inside `filesDir` once every symlink is followed, regular, 25 MB in all. */
async function readInputFiles(paths: readonly string[], filesDir: string): Promise<TransportedFile[]> {
  if (paths.length > PYTHON_MAX_FILES) throw new ToolError(`At most ${PYTHON_MAX_FILES} files can be given.`);
  const files: TransportedFile[] = [];
  let total = 0;
  for (const path of paths) {
    const { name, data } = await readInputFile(path, filesDir);
    if (files.some((file) => file.filename === name)) {
      throw new ToolError(`Two files are named "${name}"; the script sees files by name only.`);
    }
    total += data.length;
    if (total > PYTHON_FILES_LIMIT_BYTES) throw new ToolError("The files total more than 25 MB.");
    files.push({ filename: name, data: data.toString("base64") });
  }
  return files;
}

async function readInputFile(path: string, filesDir: string): Promise<{ name: string; data: Buffer }> {
  let root: string;
  let real: string;
  try {
    root = await realpath(filesDir);
    real = await realpath(resolve(filesDir, path));
  } catch {
    throw new ToolError(`File not found: ${path}`);
  }
  const rel = relative(root, real);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) {
    throw new ToolError(`${path} is not inside ${filesDir}; only files there can be given.`);
  }
  const info = await lstat(real);
  if (!info.isFile()) throw new ToolError(`${path} is not a regular file.`);
  if (info.size > PYTHON_FILES_LIMIT_BYTES) throw new ToolError(`${path} is larger than 25 MB.`);
  const name = safeFilename(basename(real));
  if (!name) throw new ToolError(`${path} has a name the script cannot be given; rename it first.`);
  return { name, data: await readFile(real) };
}

/** Saves returned files, each through a fresh temp file renamed into place (never through a symlink). */
async function saveFiles(
  files: readonly TransportedFile[],
  dir: string,
): Promise<{ path: string; size: number }[]> {
  await mkdir(dir, { recursive: true });
  const saved: { path: string; size: number }[] = [];
  for (const file of files) {
    const data = Buffer.from(file.data, "base64");
    const path = join(dir, toSafeFilename(file.filename, "output"));
    const temp = join(dir, `.tmp-${randomUUID()}`);
    await writeFile(temp, data, { flag: "wx" });
    await rename(temp, path);
    saved.push({ path, size: data.length });
  }
  return saved;
}

/** A failed call, in words the model can act on. */
function describeFailure(error: unknown): string {
  if (!(error instanceof ServiceError)) return `The python runner failed: ${errorMessage(error)}`;
  if (error.status === undefined) return `The python runner is unreachable: ${error.message}`;
  if (error.status < 300) return `The python runner answered unexpectedly: ${error.message}`;
  return `The python runner refused the run (HTTP ${error.status}): ${errorBodyText(error.body) ?? error.message}`;
}
