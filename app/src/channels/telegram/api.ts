import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { errorMessage } from "@stavrobot/common";

/** A Bot API answer that is not `ok`, with Telegram's code and, for 429, when to retry. */
export class TelegramError extends Error {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = "TelegramError";
  }
}

/**
 * The few Bot API methods the assistant uses, over plain fetch. `apiBaseUrl` is
 * https://api.telegram.org in production and a loopback fake in tests.
 */
export class TelegramApi {
  constructor(
    private readonly apiBaseUrl: string,
    private readonly token: string,
    private readonly timeoutMs = 30_000,
  ) {}

  async call<T>(method: string, params: Record<string, unknown>): Promise<T> {
    return this.request<T>(method, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(params),
    });
  }

  /** A method with one file uploaded (sendPhoto, sendVoice, sendDocument). */
  async upload<T>(
    method: string,
    field: string,
    file: { path: string; name?: string | undefined },
    params: Record<string, string>,
  ): Promise<T> {
    const form = new FormData();
    for (const [key, value] of Object.entries(params)) form.append(key, value);
    form.append(field, new Blob([await readFile(file.path)]), file.name ?? basename(file.path));
    return this.request<T>(method, { body: form });
  }

  /** Downloads a file the bot received (getFile, then the file URL). */
  async download(fileId: string, maxBytes: number): Promise<{ data: Buffer; filePath: string }> {
    const file = await this.call<{ file_path?: string; file_size?: number }>("getFile", { file_id: fileId });
    if (!file.file_path)
      throw new TelegramError("Telegram did not give a download path for the file", undefined);
    if ((file.file_size ?? 0) > maxBytes) throw new TelegramError("The file is too large", undefined);
    const response = await fetch(`${this.base()}/file/bot${this.token}/${file.file_path}`, {
      signal: AbortSignal.timeout(this.timeoutMs),
    }).catch((error: unknown) => {
      throw new TelegramError(`Telegram is unreachable: ${errorMessage(error)}`, undefined);
    });
    if (!response.ok)
      throw new TelegramError(`Downloading the file failed (HTTP ${response.status})`, response.status);
    const data = Buffer.from(await response.arrayBuffer());
    if (data.length > maxBytes) throw new TelegramError("The file is too large", undefined);
    return { data, filePath: file.file_path };
  }

  private base(): string {
    return this.apiBaseUrl.replace(/\/+$/, "");
  }

  private async request<T>(
    method: string,
    init: { headers?: Record<string, string>; body: FormData | string },
  ): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.base()}/bot${this.token}/${method}`, {
        method: "POST",
        ...init,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw new TelegramError(`Telegram is unreachable: ${errorMessage(error)}`, undefined);
    }
    const body = (await response.json().catch(() => undefined)) as
      | {
          ok: boolean;
          result?: T;
          description?: string;
          error_code?: number;
          parameters?: { retry_after?: number };
        }
      | undefined;
    if (!body?.ok) {
      const description = body?.description ?? `HTTP ${response.status}`;
      throw new TelegramError(
        `${method} failed: ${description}`,
        body?.error_code ?? response.status,
        body?.parameters?.retry_after,
      );
    }
    return body.result as T;
  }
}
