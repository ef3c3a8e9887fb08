// How one of our NATS clients (the gate's request emitter and reply sink, a hook served by the
// SDK) proves who it is and checks the server it talks to. One options type for all three, so a
// gate flag, a hook option and a hook environment variable mean the same thing.
//
// Secrets are only ever named by file (a mounted Secret), never passed as values: argv and
// environment values show up in `ps`, in the pod spec and in crash dumps. The files are read
// again at every (re)connect, so a rotated Secret takes effect at the next reconnect without a
// restart; they are also read once up front, so a missing or unreadable one stops the start with
// a message naming it.
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

export interface NatsTls {
  /** PEM CA bundle the server's certificate must chain to. Setting any TLS option requires TLS (no plaintext fallback). */
  caFile?: string;
  /** Client certificate (PEM) for a server that verifies clients (mTLS); with `keyFile`. */
  certFile?: string;
  keyFile?: string;
  /** The name the server's certificate must carry, when it differs from the host in the URL. */
  serverName?: string;
}

/** At most one of creds, nkey, token, user/password. */
export interface NatsSecurity {
  /** A `.creds` file (user JWT and nkey seed, as `nsc` writes it), for a server in operator (JWT) mode. */
  credsFile?: string;
  /** A file holding a user nkey seed (`SU…`), for a server whose config lists the user's public nkey. */
  nkeyFile?: string;
  /** A file holding a token. */
  tokenFile?: string;
  /** User name; the password comes from `passwordFile`. */
  user?: string;
  passwordFile?: string;
  tls?: NatsTls;
  /**
   * Where this client's answers arrive (JetStream API responses, publish acks, pulled messages).
   * Give each identity its own and grant it `subscribe` on `<inboxPrefix>.>` only: whoever may
   * subscribe to another client's inbox reads the messages that client pulls.
   */
  inboxPrefix?: string;
}

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
