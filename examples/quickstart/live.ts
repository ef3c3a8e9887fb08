// Shows the view lines as they change. On a terminal: a compact block redrawn in place (at most
// ten times a second). Otherwise, or once switched to logging: one timestamped line per line
// whose text changed, and one per object that went away.
import { type Colors, clock, type Output } from './output.ts';
import type { Mark, ViewLine } from './view.ts';

export interface LiveView {
  update(lines: readonly ViewLine[], header: string): void;
  /** Leaves the block on screen and logs changes from now on, one line each. */
  switchToLog(): void;
}

const SYMBOLS: Record<Mark, string> = { wait: '…', held: '■', ok: '✔', fail: '✘' };

export function markSymbol(mark: Mark, c: Colors): string {
  const symbol = SYMBOLS[mark];
  return mark === 'ok' ? c.green(symbol) : mark === 'held' ? c.yellow(symbol) : mark === 'fail' ? c.red(symbol) : c.dim(symbol);
}

/** One line of a log that stands on its own: no indentation, the owner named. */
export function logText(line: ViewLine): string {
  return line.context ? `${line.context}: ${line.text}` : line.text;
}

/** The lines whose text is new or changed since `before`, and the subjects of lines gone since. */
export function changes(before: ReadonlyMap<string, string>, lines: readonly ViewLine[]): { changed: ViewLine[]; gone: string[] } {
  const now = new Set(lines.map((l) => l.key));
  return {
    changed: lines.filter((l) => before.get(l.key) !== logText(l)),
    gone: [...before.entries()].filter(([key]) => !now.has(key)).map(([, text]) => text.slice(0, text.indexOf(':')) || text),
  };
}

export function createLiveView(out: Output, c: Colors): LiveView {
  let logging = !out.tty;
  const printed = new Map<string, string>();
  let pending: { lines: readonly ViewLine[]; header: string } | undefined;
  let timer: NodeJS.Timeout | undefined;

  const log = (lines: readonly ViewLine[]) => {
    const { changed, gone } = changes(printed, lines);
    for (const line of changed) {
      const text = logText(line);
      out.say(out.tty ? `${c.dim(clock())} ${markSymbol(line.mark, c)} ${text}` : `${SYMBOLS[line.mark]} ${text}`);
      printed.set(line.key, text);
    }
    for (const subject of gone) out.say(`${out.tty ? `${c.dim(clock())} ` : ''}${subject}: deleted`);
    for (const key of [...printed.keys()]) if (!lines.some((l) => l.key === key)) printed.delete(key);
  };
  const draw = () => {
    timer = undefined;
    if (!pending || logging) return;
    const { lines, header } = pending;
    out.region([c.bold(header), ...lines.map((l) => `${'  '.repeat(l.indent + 1)}${markSymbol(l.mark, c)} ${l.text}`)]);
  };

  return {
    update(lines, header) {
      if (logging) return log(lines);
      pending = { lines, header };
      timer ??= setTimeout(draw, 100);
    },
    switchToLog() {
      if (logging) return;
      if (timer) clearTimeout(timer);
      draw();
      out.keepRegion();
      logging = true;
      // What is on screen counts as printed: only later changes are logged.
      for (const line of pending?.lines ?? []) printed.set(line.key, logText(line));
    },
  };
}
