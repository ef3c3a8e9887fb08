import { X509Certificate } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { connect, createServer, type Server } from 'node:tls';
import test from 'ava';
import { createCa, inspectCerts, issueServingCert, splitCertificates } from '../../../../gate/webhooks/cert-authority.ts';
import { caValidity, leafValidity, servingSans } from '../../../../gate/webhooks/cert-policy.ts';
import { useCerts, type WebhookCerts } from '../../../../gate/webhooks/certs.ts';

const now = new Date();
const caDates = caValidity(now);
const sans = servingSans({ service: { name: 'knative-prestart-gate', namespace: 'knative-prestart' }, ipAddresses: ['127.0.0.1'] });

test('the serving certificate is issued by the CA and valid for exactly the wanted names', async (t) => {
  const ca = await createCa(caDates);
  const leaf = await issueServingCert(ca, sans, leafValidity(now, caDates));
  const caCert = new X509Certificate(ca.certPem);
  const cert = new X509Certificate(leaf.certPem);

  t.true(caCert.ca);
  t.false(cert.ca);
  t.true(cert.checkIssued(caCert));
  t.true(cert.verify(caCert.publicKey));
  t.is(cert.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
  t.is(cert.checkHost('knative-prestart-gate.knative-prestart.svc'), 'knative-prestart-gate.knative-prestart.svc');
  t.is(cert.checkIP('127.0.0.1'), '127.0.0.1');
  t.is(cert.checkHost('other.knative-prestart.svc'), undefined);
  t.is(
    cert.subjectAltName,
    'DNS:knative-prestart-gate, DNS:knative-prestart-gate.knative-prestart, DNS:knative-prestart-gate.knative-prestart.svc, ' +
      'DNS:knative-prestart-gate.knative-prestart.svc.cluster.local, IP Address:127.0.0.1',
  );
  t.regex(cert.keyUsage?.join(',') ?? '', /1\.3\.6\.1\.5\.5\.7\.3\.1/, 'serverAuth');
});

test('inspecting stored certificates reports their dates, names, and whether keys and issuer match', async (t) => {
  const ca = await createCa(caDates);
  const other = await createCa(caDates);
  const leaf = await issueServingCert(ca, sans, leafValidity(now, caDates));

  const facts = inspectCerts(ca, leaf);
  t.deepEqual(facts.leaf.dnsNames, sans.dnsNames);
  t.deepEqual(facts.leaf.ipAddresses, ['127.0.0.1']);
  t.true(facts.ca.keyMatches && facts.leaf.keyMatches && facts.leaf.issuedByCa);
  t.true(facts.leaf.notAfter.getTime() - facts.leaf.notBefore.getTime() > 29 * 24 * 60 * 60 * 1000);

  t.false(inspectCerts(other, leaf).leaf.issuedByCa);
  t.false(inspectCerts({ ...ca, keyPem: other.keyPem }, leaf).ca.keyMatches);
  t.false(inspectCerts(ca, { ...leaf, keyPem: ca.keyPem }).leaf.keyMatches);
});

test('a bundle splits into its certificates', async (t) => {
  const a = await createCa(caDates);
  const b = await createCa(caDates);
  t.deepEqual(splitCertificates(`${a.certPem}\n${b.certPem}\n`), [a.certPem.trim(), b.certPem.trim()]);
  t.deepEqual(splitCertificates(''), []);
});

// What the apiserver does: connect to 127.0.0.1 trusting only the caBundle.
function peerCertificate(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.once('error', reject);
  });
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

test('a running TLS server switches to a renewed certificate, and clients trusting the bundle accept both', async (t) => {
  const oldCa = await createCa(caDates);
  const newCa = await createCa(caDates);
  const first = await issueServingCert(oldCa, sans, leafValidity(now, caDates));
  const second = await issueServingCert(newCa, sans, leafValidity(now, caDates));
  const bundle = `${newCa.certPem}\n${oldCa.certPem}`;

  const server = createServer({ key: first.keyPem, cert: first.certPem }, (s) => s.end());
  t.teardown(() => server.close());
  const port = await listen(server);

  t.is(await peerCertificate(port, bundle), new X509Certificate(first.certPem).fingerprint256);
  const renewed: WebhookCerts = { key: second.keyPem, cert: second.certPem, caBundle: bundle, notAfter: now, renewAt: now };
  useCerts(server, renewed);
  t.is(await peerCertificate(port, bundle), new X509Certificate(second.certPem).fingerprint256);
  await t.throwsAsync(peerCertificate(port, oldCa.certPem), { message: /certificate/i }, 'the old CA alone no longer verifies');
});
