// H3, the other two ways in: a nats-server that requires TLS with client certificates (mTLS) and
// a token, reached by the gate as the CLI runs it in a pod (every secret from a file); and a
// nats-server in operator (JWT) mode, where the gate and the hook authenticate with `.creds`
// files whose user JWTs carry the permissions of schemas/nats-permissions.ts.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCertificateAuthority, issueCertificate } from '@knative-prestart/devcluster/certs.ts';
import { type GateEnv, gateEnv } from '@knative-prestart/devcluster/gate/env.ts';
import { spawnGate } from '@knative-prestart/devcluster/gate/process.ts';
import { startNatsServer } from '@knative-prestart/devcluster/nats.ts';
import { operatorSetup } from '@knative-prestart/devcluster/nats-auth.ts';
import { freePorts } from '@knative-prestart/devcluster/ports.ts';
import test from 'ava';
import { connect, ErrorCode, type NatsError } from 'nats';
import { serveHookNats, succeed } from '../../../hooks/index.ts';
import type { NatsSecurity } from '../../../schemas/nats-auth.ts';
import { hookDurable, hookInboxPrefix } from '../../../schemas/nats-names.ts';
import { gateNatsPermissions, hookNatsPermissions } from '../../../schemas/nats-permissions.ts';
import { natsSecurityOptions } from '../../../transport/nats-auth.ts';

const SERVER_NAME = 'nats.prestart.test';

function secretsDir() {
  const dir = mkdtempSync(join(tmpdir(), 'prestart-nats-secrets-'));
  return {
    dir,
    file(name: string, text: string): string {
      const path = join(dir, name);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    },
  };
}

async function refused(security: NatsSecurity, servers: string): Promise<NatsError | undefined> {
  try {
    const nc = await connect({ servers, maxReconnectAttempts: 0, timeout: 5_000, ...natsSecurityOptions(security, '_INBOX') });
    await nc.close();
    return undefined;
  } catch (err) {
    return err as NatsError;
  }
}

function natsHook(env: GateEnv, name: string, match: string) {
  return env.createHook(name, { match: env.annotationMatch(match), resendInterval: '1m', delivery: { transport: 'nats' } });
}

test.serial(
  'TLS with client certificates and a token: a client without the CA, the server name, a certificate or the token is refused; the gate (CLI) and a hook get through',
  async (t) => {
    const secrets = secretsDir();
    const ca = await createCertificateAuthority(secrets.dir, 'nats-ca', 'prestart test NATS CA');
    const serverCert = await issueCertificate(ca, secrets.dir, 'nats-server', {
      commonName: SERVER_NAME,
      server: { dnsNames: [SERVER_NAME] },
    });
    const gateCert = await issueCertificate(ca, secrets.dir, 'gate', { commonName: 'knative-prestart-gate', client: true });
    const hookCert = await issueCertificate(ca, secrets.dir, 'hook', { commonName: 'hook', client: true });
    const otherCa = await createCertificateAuthority(join(secrets.dir, 'other'), 'other-ca', 'some other CA');
    const token = secrets.file('token', 'a-long-random-token\n');
    const nats = await startNatsServer({
      config: [
        `tls { cert_file: ${JSON.stringify(serverCert.certFile)}, key_file: ${JSON.stringify(serverCert.keyFile)}, ca_file: ${JSON.stringify(ca.certFile)}, verify: true }`,
        'authorization { token: "a-long-random-token" }',
      ].join('\n'),
    });
    t.teardown(() => nats.stop());

    const full: NatsSecurity = { tokenFile: token, tls: { caFile: ca.certFile, serverName: SERVER_NAME, ...hookCert } };
    const attempts: Array<[string, NatsSecurity]> = [
      ['no TLS options (the system CAs do not know this server)', { tokenFile: token }],
      ['another CA', { ...full, tls: { ...full.tls, caFile: otherCa.certFile } }],
      ['no server name (the certificate does not name 127.0.0.1)', { ...full, tls: { caFile: ca.certFile, ...hookCert } }],
      ['no client certificate', { ...full, tls: { caFile: ca.certFile, serverName: SERVER_NAME } }],
      ['no token', { tls: full.tls ?? {} }],
    ];
    for (const [what, security] of attempts) t.truthy(await refused(security, nats.url), `refused with ${what}`);
    t.is((await refused({ tls: full.tls ?? {} }, nats.url))?.code, ErrorCode.AuthorizationViolation);
    t.is(await refused(full, nats.url), undefined, 'a hook with all of them connects');

    const env = await gateEnv('natstls', { inProcess: false });
    t.teardown(() => env.stop());
    const name = `${env.instance}-db`;
    const hook = await serveHookNats({ name, servers: nats.url, security: full, handler: async () => succeed('over TLS') });
    t.teardown(() => hook.stop());
    const [webhook, sink] = await freePorts(2);
    const gate = await spawnGate(env, { webhook: webhook as number, sink: sink as number }, undefined, [
      '--nats',
      nats.url,
      '--nats-token-file',
      token,
      '--nats-tls-ca',
      ca.certFile,
      '--nats-tls-cert',
      gateCert.certFile,
      '--nats-tls-key',
      gateCert.keyFile,
      '--nats-tls-server-name',
      SERVER_NAME,
    ]);
    t.teardown(() => gate.stop());
    await natsHook(env, name, 'natstls');
    await env.waitUntilStamped(name, { natstls: 'yes' });
    await env.createRevision('natstls-00001', { annotations: { natstls: 'yes' } });
    await env.waitReleased('natstls-00001', 60_000);
    t.is(
      (await env.waitForRun('natstls-00001', 'Released', (r) => r.status?.phase === 'Released')).status?.hooks?.[0]?.message,
      'over TLS',
    );
  },
);

test.serial(
  'operator mode: the gate and a hook with .creds files release a Revision; no creds or a foreign account is refused; the JWT permissions hold',
  async (t) => {
    const operator = operatorSetup();
    const nats = await startNatsServer({ config: operator.config });
    t.teardown(() => nats.stop());
    const env = await gateEnv('natscreds', { inProcess: false });
    t.teardown(() => env.stop());
    const name = `${env.instance}-db`;
    const secrets = secretsDir();
    const gateCreds = secrets.file('gate.creds', operator.userCreds('gate', gateNatsPermissions()));
    const hookCreds = secrets.file('hook.creds', operator.userCreds('hook', hookNatsPermissions(name)));
    const foreign = secrets.file('foreign.creds', operator.foreignCreds('intruder', gateNatsPermissions()));

    t.is((await refused({}, nats.url))?.code, ErrorCode.AuthorizationViolation, 'no creds');
    t.is(
      (await refused({ credsFile: foreign }, nats.url))?.code,
      ErrorCode.AuthorizationViolation,
      'a user of an account the operator never signed',
    );

    await env.startGate({ nats: { servers: nats.url, security: { credsFile: gateCreds } } });
    const hook = await serveHookNats({
      name,
      servers: nats.url,
      security: { credsFile: hookCreds },
      handler: async () => succeed('with creds'),
    });
    t.teardown(() => hook.stop());
    await natsHook(env, name, 'natscreds');
    await env.waitUntilStamped(name, { natscreds: 'yes' });
    await env.createRevision('natscreds-00001', { annotations: { natscreds: 'yes' } });
    await env.waitReleased('natscreds-00001');
    t.is(
      (await env.waitForRun('natscreds-00001', 'Released', (r) => r.status?.phase === 'Released')).status?.hooks?.[0]?.message,
      'with creds',
    );

    // The permissions travel in the user JWT: the hook still cannot read every request.
    const nc = await connect({ servers: nats.url, ...natsSecurityOptions({ credsFile: hookCreds }, hookInboxPrefix(hookDurable(name))) });
    t.teardown(() => nc.close());
    const sub = nc.subscribe('prestart.requests.>');
    await nc.flush();
    t.true(sub.isClosed(), 'subscribing to every request is refused');
  },
);
