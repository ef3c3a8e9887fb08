// Identities for a test nats-server: nkey users and user/password users with permissions in a
// config-file account, or an operator (JWT) setup whose users come as `.creds` files, the way
// `nsc` makes them. The keys are nkeys (ed25519) from nats.js's own nkeys; the JWTs are signed
// here in the format nats-server verifies (header, claims, ed25519 signature, base64url), so no
// `nsc` binary is needed.
import { randomBytes } from 'node:crypto';
import { nkeys } from 'nats';

type KeyPair = ReturnType<typeof nkeys.createUser>;

/** Allow lists, as schemas/nats-permissions.ts writes them for the gate and each hook (devcluster imports no product code). */
export interface NatsPermissions {
  publish: string[];
  subscribe: string[];
}

export interface NkeyUser {
  publicKey: string;
  /** The seed (`SU…`), what a client's nkey file holds. */
  seed: string;
}

export function newNkeyUser(): NkeyUser {
  const kp = nkeys.createUser();
  return { publicKey: kp.getPublicKey(), seed: new TextDecoder().decode(kp.getSeed()) };
}

/** A user of a config-file account: by nkey, or by name and password. */
export type ConfigUser = ({ nkey: string } | { user: string; password: string }) & { permissions: NatsPermissions };

/** The `accounts` block: each account with JetStream on and its users with exactly their permissions. */
export function accountsConfig(accounts: Record<string, ConfigUser[]>): string {
  const block = Object.fromEntries(
    Object.entries(accounts).map(([name, users]) => [
      name,
      {
        jetstream: 'enabled',
        users: users.map(({ permissions, ...who }) => ({ ...who, permissions: serverPermissions(permissions) })),
      },
    ]),
  );
  // nats-server's config format reads JSON.
  return `accounts: ${JSON.stringify(block, null, 2)}`;
}

function serverPermissions(p: NatsPermissions) {
  return { publish: { allow: p.publish }, subscribe: { allow: p.subscribe } };
}

export interface OperatorSetup {
  /** operator, resolver and preloaded accounts for the server's config. */
  config: string;
  /** A `.creds` file's text for a new user of the application account with these permissions. */
  userCreds(name: string, permissions: NatsPermissions): string;
  /** The same, signed by an account the server does not know. */
  foreignCreds(name: string, permissions: NatsPermissions): string;
}

/** An operator with a system account and one application account with JetStream, kept in memory by the server. */
export function operatorSetup(): OperatorSetup {
  const operator = nkeys.createOperator();
  const system = nkeys.createAccount();
  const app = nkeys.createAccount();
  const unlimited = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };
  const operatorJwt = sign(operator, operator.getPublicKey(), 'operator', { type: 'operator', version: 2 });
  const accountJwt = (kp: KeyPair, name: string, jetstream: boolean) =>
    sign(operator, kp.getPublicKey(), name, {
      type: 'account',
      version: 2,
      limits: { ...unlimited, ...(jetstream ? { mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 } : {}) },
      default_permissions: { pub: {}, sub: {} },
    });
  const config = [
    `operator: ${operatorJwt}`,
    `system_account: ${system.getPublicKey()}`,
    'resolver: MEMORY',
    `resolver_preload: ${JSON.stringify({
      [system.getPublicKey()]: accountJwt(system, 'SYS', false),
      [app.getPublicKey()]: accountJwt(app, 'PRESTART', true),
    })}`,
  ].join('\n');
  const credsSignedBy = (account: KeyPair) => (name: string, permissions: NatsPermissions) => {
    const user = nkeys.createUser();
    const token = sign(account, user.getPublicKey(), name, {
      type: 'user',
      version: 2,
      pub: { allow: permissions.publish },
      sub: { allow: permissions.subscribe },
      subs: -1,
      data: -1,
      payload: -1,
    });
    return credsFile(token, new TextDecoder().decode(user.getSeed()));
  };
  return { config, userCreds: credsSignedBy(app), foreignCreds: credsSignedBy(nkeys.createAccount()) };
}

function sign(issuer: KeyPair, subject: string, name: string, nats: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const claims = {
    jti: randomBytes(16).toString('hex').toUpperCase(),
    iat: Math.floor(Date.now() / 1000),
    iss: issuer.getPublicKey(),
    name,
    sub: subject,
    nats,
  };
  const signed = `${part({ typ: 'JWT', alg: 'ed25519-nkey' })}.${part(claims)}`;
  return `${signed}.${Buffer.from(issuer.sign(new TextEncoder().encode(signed))).toString('base64url')}`;
}

function credsFile(jwt: string, seed: string): string {
  return [
    '-----BEGIN NATS USER JWT-----',
    jwt,
    '------END NATS USER JWT------',
    '',
    '-----BEGIN USER NKEY SEED-----',
    seed,
    '------END USER NKEY SEED------',
    '',
  ].join('\n');
}
