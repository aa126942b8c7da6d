import type { Attachment } from "@stavrobot/common";
import type { Transcriber } from "./stt.js";

/**
 * The message text with its voice notes transcribed: a voice note alone becomes the text; a
 * transcript follows text that came with it. The audio stays attached either way. Without a
 * transcriber (no `[stt]`), the text is unchanged and the model sees the audio as a file.
 */
export async function withTranscripts(
  text: string | undefined,
  attachments: readonly Attachment[],
  transcriber: Transcriber | undefined,
): Promise<string | undefined> {
  if (!transcriber) return text;
  const parts: string[] = text?.trim() ? [text] : [];
  const voices = attachments.filter((file) => file.mimeType.startsWith("audio/"));
  for (const file of voices) {
    const result = await transcriber.transcribe({
      path: file.storedPath,
      mimeType: file.mimeType,
      filename: file.originalFilename,
    });
    if ("text" in result)
      parts.push(
        voices.length === 1 && parts.length === 0
          ? result.text
          : `[Voice note ${file.originalFilename}]: ${result.text}`,
      );
    else parts.push(`[Voice note could not be transcribed: ${result.error}]`);
  }
  return parts.length > 0 ? parts.join("\n\n") : text;
}
