import { clearScreenDown, cursorTo, moveCursor, type Interface } from "node:readline";

export const PROMPT = "> ";

/**
 * The REPL's output while someone may be typing: text that arrives on its own (a reply, a
 * reminder) is written above the line being typed, which is drawn again below it as it was,
 * cursor included. The prompt shows only while the session waits for a line; while a reply is
 * awaited the input line has none (what is typed then steers the running request).
 */
export class Screen {
  /** The prompt is on screen: the session waits for the next line. */
  private prompting = false;
  /** On a pipe: the output's last line holds only the prompt (what is typed is not echoed). */
  private afterPrompt = false;
  private closed = false;

  constructor(
    private readonly rl: Interface,
    private readonly out: NodeJS.WritableStream,
    /** A terminal: readline edits the line in place. Otherwise (a pipe) output is appended. */
    private readonly tty: boolean,
  ) {
    rl.setPrompt("");
    rl.on("close", () => (this.closed = true));
  }

  /** Waits for a line: shows the prompt, with anything typed ahead after it. */
  prompt(): void {
    if (this.closed) return;
    this.prompting = true;
    this.afterPrompt = true;
    this.rl.setPrompt(PROMPT);
    this.rl.prompt(true);
  }

  /** A line was taken: no prompt until the next `prompt()`. */
  taken(): void {
    this.prompting = false;
    this.rl.setPrompt("");
  }

  /** Writes a reply (`text` ends with a newline) without breaking the line being typed. */
  print(text: string, stream: NodeJS.WritableStream = this.out): void {
    this.write(text, stream, false);
  }

  /** Writes text nobody asked for just now (a reminder) on lines of its own. */
  notice(text: string): void {
    this.write(text, this.out, true);
  }

  private write(text: string, stream: NodeJS.WritableStream, ownLines: boolean): void {
    if (this.closed || !this.tty) {
      // Nothing is echoed on a pipe: a reply follows its prompt, a notice starts a line of its own.
      if (ownLines && this.afterPrompt) this.out.write("\n");
      this.afterPrompt = false;
      stream.write(text);
      if (this.prompting && !this.closed) this.prompt();
      return;
    }
    // Up to where the prompt (or the line typed without one) starts, and clear it all.
    const { rows } = this.rl.getCursorPos();
    moveCursor(this.out, 0, -rows);
    cursorTo(this.out, 0);
    clearScreenDown(this.out);
    stream.write(text);
    if (!this.prompting && this.rl.line === "") return;
    // readline redraws from as many rows above the cursor as it was on: make room, then redraw.
    this.out.write("\n".repeat(rows));
    this.rl.prompt(true);
  }
}
