/** Signal text-style ranges shared by both directions of the Markdown conversion. */

/** The styles Signal renders (signal-cli TextStyle.Style, minus NONE). */
export const signalStyles = ["BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE", "SPOILER"] as const;
export type SignalStyle = (typeof signalStyles)[number];

/** One styled range; `start` and `length` are UTF-16 code units, as Signal and signal-cli count them. */
export interface StyleRange {
  start: number;
  length: number;
  style: SignalStyle;
}

export function isSignalStyle(style: string): style is SignalStyle {
  return (signalStyles as readonly string[]).includes(style);
}

/** Formats ranges as signal-cli's `start:length:STYLE` strings, in a stable order (by start, outer first). */
export function toTextStyleStrings(ranges: StyleRange[]): string[] {
  return [...ranges]
    .sort(
      (a, b) =>
        a.start - b.start ||
        b.length - a.length ||
        signalStyles.indexOf(a.style) - signalStyles.indexOf(b.style),
    )
    .map((range) => `${range.start}:${range.length}:${range.style}`);
}
