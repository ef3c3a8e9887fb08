// RFC 6902 operations as admission webhooks return them (base64 of this JSON list).

export type JsonPatchOp = { op: 'add' | 'replace' | 'test'; path: string; value: unknown } | { op: 'remove'; path: string };

/** One RFC 6901 reference token: label keys like "prestart.dev/hold" contain '/', which must become '~1'. */
export function escapePointerToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** Builds a JSON pointer from raw (unescaped) tokens. */
export function pointer(...tokens: (string | number)[]): string {
  return tokens.map((t) => `/${escapePointerToken(String(t))}`).join('');
}
