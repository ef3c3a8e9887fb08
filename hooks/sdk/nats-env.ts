// A hook's NATS connection from its environment, for a hook run as a pod: the URL and the paths of
// mounted Secrets. The names are the `nats` CLI's where it takes a file (NATS_CREDS, NATS_NKEY,
// NATS_CA, NATS_CERT, NATS_KEY). A secret is never taken from a variable's value: NATS_PASSWORD
// and NATS_TOKEN (values to the `nats` CLI) are refused rather than ignored, so a hook never
// connects anonymously while its author thinks it authenticates.
import type { NatsSecurity, NatsTls } from '../../schemas/nats-auth.ts';

export function natsSecurityFromEnv(env: NodeJS.ProcessEnv = process.env): NatsSecurity | undefined {
  for (const byValue of ['NATS_PASSWORD', 'NATS_TOKEN']) {
    if (env[byValue] !== undefined)
      throw new Error(`${byValue} puts a secret in the environment: mount it as a file and set ${byValue}_FILE`);
  }
  const security: NatsSecurity = {};
  const tls: NatsTls = {};
  const set = <K extends string>(into: Partial<Record<K, string>>, key: K, name: string) => {
    const value = env[name];
    if (value !== undefined && value !== '') into[key] = value;
  };
  set(security, 'credsFile', 'NATS_CREDS');
  set(security, 'nkeyFile', 'NATS_NKEY');
  set(security, 'tokenFile', 'NATS_TOKEN_FILE');
  set(security, 'user', 'NATS_USER');
  set(security, 'passwordFile', 'NATS_PASSWORD_FILE');
  set(security, 'inboxPrefix', 'NATS_INBOX_PREFIX');
  set(tls, 'caFile', 'NATS_CA');
  set(tls, 'certFile', 'NATS_CERT');
  set(tls, 'keyFile', 'NATS_KEY');
  set(tls, 'serverName', 'NATS_TLS_SERVER_NAME');
  if (Object.keys(tls).length > 0) security.tls = tls;
  return Object.keys(security).length > 0 ? security : undefined;
}
