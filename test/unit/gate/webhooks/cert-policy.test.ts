import test from 'ava';
import {
  caBundle,
  caValidity,
  isRenewalDue,
  leafValidity,
  nextCheckAt,
  planCerts,
  renewAt,
  type StoredCertFacts,
  sameSans,
  servingSans,
} from '../../../../gate/webhooks/cert-policy.ts';

const DAY = 24 * 60 * 60 * 1000;
const t0 = new Date('2026-01-01T00:00:00Z');
const at = (days: number): Date => new Date(t0.getTime() + days * DAY);

test('a Service gets the names the apiserver and in-cluster clients use for it', (t) => {
  const sans = servingSans({ service: { name: 'knative-prestart-gate', namespace: 'knative-prestart' } });
  t.deepEqual(sans.dnsNames, [
    'knative-prestart-gate',
    'knative-prestart-gate.knative-prestart',
    'knative-prestart-gate.knative-prestart.svc',
    'knative-prestart-gate.knative-prestart.svc.cluster.local',
  ]);
  t.deepEqual(sans.ipAddresses, []);
});

test('explicit names and IPs are added once each; DNS names are case-insensitive', (t) => {
  const sans = servingSans({ dnsNames: ['Gate.Example', 'gate.example', 'localhost'], ipAddresses: ['127.0.0.1', '::1', '127.0.0.1'] });
  t.deepEqual(sans, { dnsNames: ['gate.example', 'localhost'], ipAddresses: ['127.0.0.1', '::1'] });
});

test('a certificate for no name at all, or for a malformed IP, is refused', (t) => {
  t.throws(() => servingSans({}), { message: /no DNS name or IP address/ });
  t.throws(() => servingSans({ ipAddresses: ['127.0.0.300'] }), { message: /"127\.0\.0\.300" is not an IP address/ });
});

test('SAN lists compare as sets', (t) => {
  t.true(sameSans({ dnsNames: ['a', 'b'], ipAddresses: ['127.0.0.1'] }, { dnsNames: ['B', 'a'], ipAddresses: ['127.0.0.1'] }));
  t.false(sameSans({ dnsNames: ['a'], ipAddresses: [] }, { dnsNames: ['a'], ipAddresses: ['127.0.0.1'] }));
  t.false(sameSans({ dnsNames: ['a', 'b'], ipAddresses: [] }, { dnsNames: ['a'], ipAddresses: [] }));
});

test('renewal is due once less than a third of the lifetime is left', (t) => {
  const v = { notBefore: at(0), notAfter: at(30) };
  t.deepEqual(renewAt(v), at(20));
  t.false(isRenewalDue(v, at(19.99)));
  t.true(isRenewalDue(v, at(20)));
  t.true(isRenewalDue(v, at(31)), 'an expired certificate is due too');
});

test('certificates start five minutes early, and a leaf never outlives its CA', (t) => {
  const ca = caValidity(t0, 365 * DAY);
  t.deepEqual(ca, { notBefore: new Date(t0.getTime() - 5 * 60 * 1000), notAfter: at(365) });
  t.deepEqual(leafValidity(t0, ca, 30 * DAY).notAfter, at(30));
  t.deepEqual(leafValidity(at(350), ca, 30 * DAY).notAfter, at(365));
});

const wanted = { dnsNames: ['gate.ns.svc'], ipAddresses: [] };
function stored(overrides: { ca?: Partial<StoredCertFacts['ca']>; leaf?: Partial<StoredCertFacts['leaf']> } = {}): StoredCertFacts {
  return {
    ca: { notBefore: at(0), notAfter: at(365), keyMatches: true, ...overrides.ca },
    leaf: { notBefore: at(0), notAfter: at(30), ...wanted, keyMatches: true, issuedByCa: true, ...overrides.leaf },
  };
}

test('valid certificates for the wanted names are reused', (t) => {
  t.deepEqual(planCerts(stored(), wanted, at(10)), { action: 'reuse' });
});

test('nothing stored, or a damaged CA, means a new CA and leaf', (t) => {
  t.is(planCerts(undefined, wanted, at(0)).action, 'renewAll');
  t.is(planCerts(stored({ ca: { keyMatches: false } }), wanted, at(1)).action, 'renewAll');
});

test('a CA in the last third of its life is replaced together with the leaf', (t) => {
  const plan = planCerts(stored({ leaf: { notBefore: at(250), notAfter: at(280) } }), wanted, at(250));
  t.deepEqual(plan, { action: 'renewAll', reason: `the CA expires at ${at(365).toISOString()}` });
});

test('the leaf alone is renewed when it is due, names changed, or it does not belong to the CA', (t) => {
  t.is(planCerts(stored(), wanted, at(21)).action, 'renewLeaf');
  t.regex(
    (planCerts(stored(), { dnsNames: ['gate.ns.svc'], ipAddresses: ['127.0.0.1'] }, at(1)) as { reason: string }).reason,
    /names changed/,
  );
  t.regex((planCerts(stored({ leaf: { issuedByCa: false } }), wanted, at(1)) as { reason: string }).reason, /not issued by the stored CA/);
  t.regex((planCerts(stored({ leaf: { keyMatches: false } }), wanted, at(1)) as { reason: string }).reason, /key does not match/);
});

test('the next check is the earlier of the next renewal and the polling bound', (t) => {
  t.deepEqual(nextCheckAt(stored(), at(0), 60 * 60 * 1000), new Date(at(0).getTime() + 60 * 60 * 1000));
  t.deepEqual(nextCheckAt(stored(), at(19.99), DAY), at(20));
  t.deepEqual(nextCheckAt(stored(), at(25), DAY), at(25), 'overdue means now');
});

test('the bundle trusts the current CA first and keeps unexpired previous ones once', (t) => {
  const current = { pem: 'NEW\n', notAfter: at(730) };
  const bundle = caBundle(
    current,
    [
      { pem: 'NEW', notAfter: at(730) },
      { pem: 'OLD', notAfter: at(365) },
      { pem: 'GONE', notAfter: at(100) },
    ],
    at(250),
  );
  t.deepEqual(bundle, ['NEW', 'OLD']);
});
