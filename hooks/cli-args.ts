// Parsing of the hook commands' repeatable key=value options.
import { InvalidArgumentError } from 'commander';

/** "k=v" into `previous`; v is read as JSON when it looks like a JSON literal (true, 3, {"a":1}), else kept as text. */
export function keyValue(pair: string, previous: Record<string, unknown>): Record<string, unknown> {
  const eq = pair.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError(`"${pair}" is not key=value`);
  return { ...previous, [pair.slice(0, eq)]: parseValue(pair.slice(eq + 1)) };
}

/** Like keyValue, but values stay text (annotations are strings). */
export function keyText(pair: string, previous: Record<string, string>): Record<string, string> {
  const eq = pair.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError(`"${pair}" is not key=value`);
  return { ...previous, [pair.slice(0, eq)]: pair.slice(eq + 1) };
}

export function parseValue(text: string): unknown {
  if (text === 'true') return true;
  if (text === 'false') return false;
  if (text === 'null') return null;
  if (/^-?(0|[1-9]\d*)(\.\d+)?$/.test(text) && Number.isFinite(Number(text))) return Number(text);
  if (/^[[{"]/.test(text)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

export function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`"${value}" is not a positive number of seconds`);
  return n;
}

const KINDS = ['env', 'envFrom', 'volume'] as const;

export function kinds(value: string): (typeof KINDS)[number][] {
  const list = value
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  for (const k of list) {
    if (!(KINDS as readonly string[]).includes(k)) throw new InvalidArgumentError(`"${k}" is not one of ${KINDS.join(', ')}`);
  }
  return list as (typeof KINDS)[number][];
}
