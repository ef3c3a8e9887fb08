// Reading a PrestartHook's spec.params: every problem is collected, so an admin who got three
// things wrong reads all three in the PrestartRun at once.

export class ParamReader {
  readonly problems: string[] = [];

  constructor(private readonly params: Record<string, unknown>) {}

  has(key: string): boolean {
    return this.params[key] !== undefined && this.params[key] !== null;
  }

  string(key: string, opts: { required?: boolean } = {}): string | undefined {
    const v = this.read(key, opts.required);
    if (v === undefined) return undefined;
    if (typeof v === 'string' && v !== '') return v;
    return this.bad(key, 'a non-empty string', v);
  }

  bool(key: string): boolean | undefined {
    const v = this.read(key);
    if (v === undefined || typeof v === 'boolean') return v;
    return this.bad(key, 'true or false', v);
  }

  int(key: string, opts: { min?: number } = {}): number | undefined {
    const v = this.read(key);
    if (v === undefined) return undefined;
    if (typeof v === 'number' && Number.isInteger(v) && v >= (opts.min ?? Number.MIN_SAFE_INTEGER)) return v;
    return this.bad(key, opts.min === undefined ? 'a whole number' : `a whole number ≥ ${opts.min}`, v);
  }

  strings(key: string): string[] | undefined {
    const v = this.read(key);
    if (v === undefined) return undefined;
    if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return [...v];
    return this.bad(key, 'a list of strings', v);
  }

  stringMap(key: string): Record<string, string> | undefined {
    const v = this.read(key);
    if (v === undefined) return undefined;
    if (isPlainObject(v) && Object.values(v).every((s) => typeof s === 'string')) return { ...(v as Record<string, string>) };
    return this.bad(key, 'a map of strings', v);
  }

  oneOf<T extends string>(key: string, values: readonly T[]): T | undefined {
    const v = this.read(key);
    if (v === undefined) return undefined;
    if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T;
    return this.bad(key, `one of ${values.join(', ')}`, v);
  }

  /** The raw value, for shapes the caller checks itself. */
  raw(key: string): unknown {
    return this.read(key);
  }

  problem(text: string): void {
    this.problems.push(text);
  }

  private read(key: string, required = false): unknown {
    const v = this.params[key];
    if (v === undefined || v === null) {
      if (required) this.problems.push(`params.${key} is required`);
      return undefined;
    }
    return v;
  }

  private bad(key: string, expected: string, got: unknown): undefined {
    this.problems.push(`params.${key} must be ${expected}, got ${short(got)}`);
    return undefined;
  }
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function short(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

/** The message of a run that cannot start because of its params. */
export function paramsMessage(hook: string, problems: readonly string[]): string {
  return `invalid params in PrestartHook ${hook}: ${problems.join('; ')}`;
}
