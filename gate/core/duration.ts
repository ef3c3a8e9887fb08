// Go-style durations, because PrestartHook specs are written by people used to Kubernetes and
// Knative, where "90s" and "1h30m" are the norm (time.ParseDuration).

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3, // U+00B5 micro sign, as Go accepts
  μs: 1e-3, // U+03BC Greek mu, as Go accepts
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

// "ms" must be tried before "m" and "s"; the alternation order does that.
const COMPONENT = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/;
const HINT = 'use a number with a unit (ns, us, ms, s, m, h), e.g. "90s", "10m", "1h30m" or "500ms"';

export class DurationError extends Error {
  constructor(
    readonly input: unknown,
    detail: string,
  ) {
    super(`invalid duration ${JSON.stringify(input) ?? String(input)}: ${detail}; ${HINT}`);
    this.name = 'DurationError';
  }
}

/** Parses a Go duration ("90s", "1h30m", "-1.5h", "0") to milliseconds (fractional below 1 ms). */
export function parseDurationMs(text: string): number {
  if (typeof text !== 'string') throw new DurationError(text, 'not a string');
  let rest = text;
  let sign = 1;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    sign = rest.startsWith('-') ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === '0') return 0;
  if (rest === '') throw new DurationError(text, 'empty');
  let total = 0;
  while (rest !== '') {
    const m = COMPONENT.exec(rest);
    if (!m) {
      const detail = /^[\d.]+$/.test(rest) ? `missing unit after "${rest}"` : `unexpected "${rest}"`;
      throw new DurationError(text, detail);
    }
    const [whole, amount = '', unit = ''] = m;
    total += Number(amount) * (UNIT_MS[unit] ?? Number.NaN);
    rest = rest.slice(whole.length);
  }
  if (!Number.isFinite(total)) throw new DurationError(text, 'out of range');
  return sign * total;
}

export function parseDurationSeconds(text: string): number {
  return parseDurationMs(text) / 1000;
}

/** Renders seconds the short way a person writes them: 90 -> "1m30s", 3600 -> "1h", 0.5 -> "500ms". */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return String(seconds);
  if (seconds < 0) return `-${formatDuration(-seconds)}`;
  if (seconds === 0) return '0s';
  if (seconds < 1) return `${trimFloat(seconds * 1000)}ms`;
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const secs = trimFloat(seconds % 60);
  let out = '';
  if (hours > 0) out += `${hours}h`;
  if (minutes > 0) out += `${minutes}m`;
  if (secs !== 0) out += `${secs}s`;
  return out;
}

function trimFloat(n: number): number {
  return Number(n.toFixed(6));
}

/** "2025-01-01T12:03:05.000Z" -> "12:03:05Z": the time of day a person reads next to an age column. */
export function shortTime(iso: string): string {
  const m = /T(\d\d:\d\d:\d\d)/.exec(iso);
  return m ? `${m[1]}Z` : iso;
}
