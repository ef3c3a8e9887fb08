// The hook's ServiceAccount token for its replies (sender identity, docs/protocol.md): a projected
// token file, as Kubernetes' "ServiceAccount token volume projection" and Knative's OIDC docs
// describe, with the audience the gate's sink announces. The kubelet rewrites the file before the
// token expires, so it is looked at (stat) on every send and read again when it changed.
import { readFile, stat } from 'node:fs/promises';

/** Where the SDK looks when neither the option nor PRESTART_TOKEN_FILE names a file. */
export const DEFAULT_TOKEN_FILE = '/var/run/secrets/tokens/prestart-token';
export const TOKEN_FILE_ENV = 'PRESTART_TOKEN_FILE';

export type BearerSource = () => Promise<string | undefined>;

/**
 * A source of the token in `path` (default: $PRESTART_TOKEN_FILE, else DEFAULT_TOKEN_FILE).
 * A file named explicitly must exist (a send fails, and is retried, until it does); the default
 * file may be absent, and then replies carry no token, as before identity existed.
 */
export function tokenFileSource(path?: string): BearerSource {
  const explicit = path ?? process.env[TOKEN_FILE_ENV];
  const file = explicit && explicit.length > 0 ? explicit : DEFAULT_TOKEN_FILE;
  const required = explicit !== undefined && explicit.length > 0;
  let held: { mtimeMs: number; size: number; ino: number; token: string } | undefined;
  return async () => {
    let info: Awaited<ReturnType<typeof stat>>;
    try {
      info = await stat(file);
    } catch (err) {
      if (!required && (err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new Error(`the reply token file ${file} cannot be read: ${(err as Error).message}`);
    }
    // The kubelet swaps the file through a symlink (a new inode), or rewrites it: either changes one of these.
    if (held && held.mtimeMs === info.mtimeMs && held.size === info.size && held.ino === info.ino) return held.token;
    const token = (await readFile(file, 'utf8')).trim();
    if (token.length === 0) throw new Error(`the reply token file ${file} is empty`);
    held = { mtimeMs: info.mtimeMs, size: info.size, ino: info.ino, token };
    return token;
  };
}
