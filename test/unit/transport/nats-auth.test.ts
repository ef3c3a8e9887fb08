// The NATS client options every one of our clients is built with: secrets only from files, one
// way to authenticate at a time, a file that is not there stops the start with its name, TLS
// options require TLS. (That a server refuses or admits them is in
// test/integration/security/nats-*.test.ts.)
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { nkeys } from 'nats';
import { natsSecurityFromEnv } from '../../../hooks/sdk/nats-env.ts';
import { natsSecurityOptions } from '../../../transport/nats-auth.ts';

const dir = mkdtempSync(join(tmpdir(), 'prestart-nats-auth-unit-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const seed = new TextDecoder().decode(nkeys.createUser().getSeed());

test('no security: no authenticator, no TLS, and the given inbox prefix', (t) => {
  t.deepEqual(natsSecurityOptions(undefined, '_INBOX.prestart-gate'), { inboxPrefix: '_INBOX.prestart-gate' });
});

test('each way to authenticate builds an authenticator that reads the file at connect time', (t) => {
  const password = file('password', 'p4ss\n');
  const options = natsSecurityOptions({ user: 'gate', passwordFile: password }, '_INBOX.x');
  const auth = options.authenticator as unknown as (nonce?: string) => Record<string, unknown>;
  t.deepEqual(auth(), { user: 'gate', pass: 'p4ss' }, 'the trailing newline of the file is not part of the password');
  writeFileSync(password, 'rotated');
  t.deepEqual(auth(), { user: 'gate', pass: 'rotated' }, 'a rotated Secret is read at the next connect');

  const token = natsSecurityOptions({ tokenFile: file('token', 't0ken\n') }, '_INBOX.x').authenticator as unknown as () => unknown;
  t.deepEqual(token(), { auth_token: 't0ken' });
  const nkey = natsSecurityOptions({ nkeyFile: file('seed', `${seed}\n`) }, '_INBOX.x').authenticator as unknown as (n: string) => {
    nkey: string;
  };
  t.is(nkey('nonce').nkey, nkeys.fromSeed(new TextEncoder().encode(seed)).getPublicKey());
});

test('two ways at once, a user without a password, a cert without a key are refused', (t) => {
  const f = file('x', 'x');
  t.throws(() => natsSecurityOptions({ tokenFile: f, nkeyFile: f }, '_INBOX'), { message: /one of creds, nkey, token or user\/password/ });
  t.throws(() => natsSecurityOptions({ user: 'gate' }, '_INBOX'), { message: /password file/ });
  t.throws(() => natsSecurityOptions({ passwordFile: f }, '_INBOX'), { message: /password file/ });
  t.throws(() => natsSecurityOptions({ tls: { certFile: f } }, '_INBOX'), { message: /key file/ });
});

test('a missing file stops the start with its name; a file that is no nkey seed says so', (t) => {
  t.throws(() => natsSecurityOptions({ credsFile: join(dir, 'absent.creds') }, '_INBOX'), {
    message: /cannot read the creds file .*absent\.creds: ENOENT/,
  });
  t.throws(() => natsSecurityOptions({ tls: { caFile: join(dir, 'absent-ca.crt') } }, '_INBOX'), { message: /TLS CA file .*ENOENT/ });
  t.throws(() => natsSecurityOptions({ nkeyFile: file('not-a-seed', 'hello') }, '_INBOX'), { message: /user nkey seed/ });
});

test('TLS options are handed to nats.js (which then requires TLS), with the server name for Node', (t) => {
  const ca = file('ca.crt', 'pem');
  t.deepEqual(natsSecurityOptions({ tls: { caFile: ca, serverName: 'nats.example' } }, '_INBOX').tls, {
    caFile: ca,
    servername: 'nats.example',
  });
});

test('a hook reads its NATS settings from the environment, and refuses secrets given as values', (t) => {
  t.is(natsSecurityFromEnv({}), undefined);
  t.deepEqual(natsSecurityFromEnv({ NATS_CREDS: '/s/hook.creds', NATS_CA: '/s/ca.crt', NATS_TLS_SERVER_NAME: 'nats' }), {
    credsFile: '/s/hook.creds',
    tls: { caFile: '/s/ca.crt', serverName: 'nats' },
  });
  t.deepEqual(natsSecurityFromEnv({ NATS_USER: 'hook', NATS_PASSWORD_FILE: '/s/pw' }), { user: 'hook', passwordFile: '/s/pw' });
  t.throws(() => natsSecurityFromEnv({ NATS_PASSWORD: 'hunter2' }), { message: /NATS_PASSWORD_FILE/ });
  t.throws(() => natsSecurityFromEnv({ NATS_TOKEN: 'abc' }), { message: /NATS_TOKEN_FILE/ });
});
