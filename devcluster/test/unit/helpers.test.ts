import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { parseManifests } from '../../apply.ts';
import { createCertificateAuthority, issueCertificate } from '../../certs.ts';
import { startHttpsServer } from '../../https-server.ts';
import { waitFor } from '../../wait.ts';

test('waitFor returns the first truthy result and names what never happened on timeout', async (t) => {
  let calls = 0;
  t.is(await waitFor(() => (++calls >= 3 ? 'done' : undefined), { what: 'three calls', intervalMs: 1 }), 'done');

  const err = await t.throwsAsync(
    waitFor(
      () => {
        throw new Error('pods "web" not found');
      },
      { what: 'pod web Running', timeoutMs: 50, intervalMs: 10 },
    ),
  );
  t.regex(err.message, /^timed out after 0\.1s waiting for pod web Running; last error: pods "web" not found$/);
});

test('waitFor stops at once when bail reports an error', async (t) => {
  const err = await t.throwsAsync(
    waitFor(() => false, { what: 'never', timeoutMs: 10_000, bail: () => new Error('etcd exited with code 1') }),
  );
  t.is(err.message, 'etcd exited with code 1');
});

test('waitFor takes an empty array as "not yet": a wait for the matching events ends when one matches', async (t) => {
  let calls = 0;
  t.deepEqual(await waitFor(() => (++calls >= 3 ? ['Warning'] : []), { what: 'the matching events', intervalMs: 1 }), ['Warning']);
  t.is(calls, 3);
});

test('parseManifests drops empty documents, expands Lists and keeps every field', (t) => {
  const docs = parseManifests(`
# leading comment only
---
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: runs.prestart.dev}
spec:
  versions: [{name: v1alpha1, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
---
`);
  t.deepEqual(
    docs.map((d) => `${d.kind}/${d.metadata?.name}`),
    ['ConfigMap/a', 'ConfigMap/b', 'CustomResourceDefinition/runs.prestart.dev'],
  );
  t.true(JSON.stringify(docs[2]).includes('"x-kubernetes-preserve-unknown-fields":true'));
  t.throws(() => parseManifests('metadata: {name: x}'), { message: /without apiVersion\/kind/ });
});

test('issued certificates carry the user, groups (even with / and +) and SANs asked for', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'certs-test-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const ca = await createCertificateAuthority(dir, 'ca', 'test-ca');
  const client = await issueCertificate(ca, dir, 'u', { commonName: 'alice', organizations: ['system:masters', 'team/a+b'], client: true });
  const server = await issueCertificate(ca, dir, 's', { commonName: 'srv', server: { ips: ['127.0.0.1'], dnsNames: ['localhost'] } });
  const caCert = new X509Certificate(await readFile(ca.certFile));
  const clientCert = new X509Certificate(await readFile(client.certFile));
  const serverCert = new X509Certificate(await readFile(server.certFile));
  t.true(caCert.ca);
  t.true(clientCert.verify(caCert.publicKey));
  // Node prints the subject RFC 2253-style, escaping the "+" that is a plain character in the value.
  t.is(clientCert.subject, 'CN=alice\nO=system:masters\nO=team/a\\+b');
  t.deepEqual(clientCert.keyUsage, ['1.3.6.1.5.5.7.3.2']);
  t.is(serverCert.subjectAltName, 'IP Address:127.0.0.1, DNS:localhost');
  t.true(serverCert.checkIP('127.0.0.1') !== undefined);
});

test('startHttpsServer serves on 127.0.0.1 with a certificate its caBundle verifies', async (t) => {
  const server = await startHttpsServer((_req, res) => res.end('hello'));
  t.teardown(() => server.close());
  t.regex(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const ca = Buffer.from(server.caBundle, 'base64').toString('utf8');
  const body = await new Promise<string>((resolve, reject) => {
    request(`${server.url}/x`, { ca }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => {
        text += c.toString();
      });
      res.on('end', () => resolve(text));
    })
      .on('error', reject)
      .end();
  });
  t.is(body, 'hello');
});
