// The security options of one of our NATS clients (the gate's request emitter and reply sink, a
// hook served by the SDK): who it is and how it checks the server. One type for all three, so a
// gate flag, a hook option and a hook environment variable mean the same thing; what a client
// does with them is in transport/nats-auth.ts.
//
// Secrets are only ever named by file (a mounted Secret), never passed as values: argv and
// environment values show up in `ps`, in the pod spec and in crash dumps.
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
