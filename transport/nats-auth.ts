// How one of our NATS clients proves who it is and checks the server it talks to: the nats.js
// connection options for the security options of the contract (schemas/nats-auth.ts). The files
// are read again at every (re)connect, so a rotated Secret takes effect at the next reconnect
// without a restart; they are also read once up front, so a missing or unreadable one stops the
// start with a message naming it.
import { readFileSync } from 'node:fs';
import {
  type Authenticator,
  type ConnectionOptions,
  credsAuthenticator,
  nkeyAuthenticator,
  type TlsOptions,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
} from 'nats';
import type { NatsSecurity } from '../schemas/nats-auth.ts';

/** The nats.js connection options for `security`; `inboxPrefix` is used when security names none. */
export function natsSecurityOptions(security: NatsSecurity | undefined, inboxPrefix: string): Partial<ConnectionOptions> {
  const s = security ?? {};
  const ways = (['credsFile', 'nkeyFile', 'tokenFile', 'user'] as const).filter((k) => s[k] !== undefined);
  if (ways.length > 1) throw new Error(`NATS: use one of creds, nkey, token or user/password, not ${ways.join(' and ')}`);
  if ((s.user === undefined) !== (s.passwordFile === undefined))
    throw new Error('NATS: a user needs a password file, and a password file a user');
  if ((s.tls?.certFile === undefined) !== (s.tls?.keyFile === undefined)) {
    throw new Error('NATS: a TLS client certificate needs its key file, and a key file its certificate');
  }
  const options: Partial<ConnectionOptions> = { inboxPrefix: s.inboxPrefix ?? inboxPrefix };
  const authenticator = authenticatorFor(s);
  if (authenticator) options.authenticator = authenticator;
  if (s.tls) {
    for (const [what, file] of [
      ['TLS CA', s.tls.caFile],
      ['TLS certificate', s.tls.certFile],
      ['TLS key', s.tls.keyFile],
    ] as const) {
      if (file !== undefined) readSecret(what, file);
    }
    // nats.js hands unknown TLS keys on to Node's tls.connect: `servername` is Node's.
    const tls: TlsOptions & { servername?: string } = {
      ...(s.tls.caFile === undefined ? {} : { caFile: s.tls.caFile }),
      ...(s.tls.certFile === undefined ? {} : { certFile: s.tls.certFile }),
      ...(s.tls.keyFile === undefined ? {} : { keyFile: s.tls.keyFile }),
      ...(s.tls.serverName === undefined ? {} : { servername: s.tls.serverName }),
    };
    options.tls = tls;
  }
  return options;
}

function authenticatorFor(s: NatsSecurity): Authenticator | undefined {
  if (s.credsFile !== undefined) {
    const file = s.credsFile;
    readSecret('creds', file);
    return credsAuthenticator(() => readSecret('creds', file));
  }
  if (s.nkeyFile !== undefined) {
    const file = s.nkeyFile;
    const seed = () => new TextEncoder().encode(text('nkey seed', file).trim());
    if (!/^SU[A-Z2-7]+$/.test(new TextDecoder().decode(seed()))) throw new Error(`NATS: ${file} does not hold a user nkey seed (SU…)`);
    return nkeyAuthenticator(seed);
  }
  if (s.tokenFile !== undefined) {
    const file = s.tokenFile;
    text('token', file);
    return tokenAuthenticator(() => withoutNewline(text('token', file)));
  }
  if (s.user !== undefined && s.passwordFile !== undefined) {
    const file = s.passwordFile;
    text('password', file);
    return usernamePasswordAuthenticator(s.user, () => withoutNewline(text('password', file)));
  }
  return undefined;
}

function readSecret(what: string, file: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`NATS: cannot read the ${what} file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

function text(what: string, file: string): string {
  return new TextDecoder().decode(readSecret(what, file));
}

/** A Secret written with `echo` ends in a newline that is not part of the secret. */
function withoutNewline(value: string): string {
  return value.replace(/\r?\n$/, '');
}
