// Where the quickstart writes. On a terminal: log lines scroll, and a live region under them is
// redrawn in place with ANSI escapes (cursor up, clear to the end of the screen). Elsewhere (a
// pipe, a CI log): every line is timestamped and nothing is ever redrawn.
import { stripVTControlCharacters } from 'node:util';

export interface Output {
  readonly tty: boolean;
  /** A line that stays: timestamped when not on a terminal. */
  say(text: string): void;
  /** Lines meant to be copied (commands): never timestamped. */
  block(text: string): void;
  /** On a terminal: replaces the live region under the log lines. Elsewhere: ignored. */
  region(lines: readonly string[]): void;
  /** Leaves the live region on screen as it is and stops redrawing it. */
  keepRegion(): void;
}

export interface Colors {
  green(s: string): string;
  yellow(s: string): string;
  red(s: string): string;
  dim(s: string): string;
  bold(s: string): string;
}

const paint = (code: number) => (s: string) => `\x1b[${code}m${s}\x1b[0m`;
const plain = (s: string) => s;

export function colors(enabled: boolean): Colors {
  return enabled
    ? { green: paint(32), yellow: paint(33), red: paint(31), dim: paint(2), bold: paint(1) }
    : { green: plain, yellow: plain, red: plain, dim: plain, bold: plain };
}

/** 21:04:05.123, local time. */
export function clock(date = new Date()): string {
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

const ESC = 0x1b;

/**
 * Cuts a line to `width` visible characters (escape sequences take no room), so a redrawn line
 * never wraps: a wrapped line would throw off the count of lines to move up.
 */
export function fitWidth(line: string, width: number): string {
  if (stripVTControlCharacters(line).length <= width) return line;
  let visible = 0;
  let out = '';
  for (let i = 0; i < line.length; ) {
    const sequence = line.charCodeAt(i) === ESC ? /^\[[0-9;]*[A-Za-z]/.exec(line.slice(i + 1)) : null;
    if (sequence) {
      out += line.slice(i, i + 1 + sequence[0].length);
      i += 1 + sequence[0].length;
      continue;
    }
    if (visible === width - 1) return `${out}…\x1b[0m`;
    const ch = String.fromCodePoint(line.codePointAt(i) as number);
    out += ch;
    visible++;
    i += ch.length;
  }
  return out;
}

export function createOutput(stream: NodeJS.WriteStream): Output {
  const tty = stream.isTTY === true && process.env.TERM !== 'dumb';
  if (!tty) {
    return {
      tty,
      say: (text) => {
        for (const line of text.split('\n')) stream.write(`${clock()} ${line}\n`);
      },
      block: (text) => {
        stream.write(`${text}\n`);
      },
      region: () => {},
      keepRegion: () => {},
    };
  }
  let drawn: string[] = [];
  const width = () => Math.max((stream.columns ?? 120) - 1, 20);
  const erase = () => {
    if (drawn.length > 0) stream.write(`\x1b[${drawn.length}F\x1b[J`);
  };
  const draw = (lines: readonly string[]) => {
    // Lines scrolled off the top cannot be reached by moving the cursor up: never draw more than fit.
    const rows = Math.max((stream.rows ?? 40) - 2, 3);
    const shown = lines.length > rows ? [...lines.slice(0, rows - 1), `… ${lines.length - rows + 1} more lines`] : lines;
    drawn = shown.map((l) => fitWidth(l, width()));
    if (drawn.length > 0) stream.write(`${drawn.join('\n')}\n`);
  };
  const say = (text: string) => {
    const region = drawn;
    erase();
    drawn = [];
    stream.write(`${text}\n`);
    draw(region);
  };
  return {
    tty,
    say,
    block: say,
    region: (lines) => {
      erase();
      draw(lines);
    },
    keepRegion: () => {
      drawn = [];
    },
  };
}
