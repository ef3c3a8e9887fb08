import test from 'ava';
import { certSecretName, servingIdentity, webhookConfigurationName } from '../../../../gate/webhooks/tls.ts';

const base = { host: '0.0.0.0', port: 8443, bindingRoot: '/bindings' };

test('in a cluster the certificate names the Service', (t) => {
  t.deepEqual(servingIdentity({ ...base, service: { name: 'knative-prestart-gate', namespace: 'knative-prestart', port: 443 } }), {
    service: { name: 'knative-prestart-gate', namespace: 'knative-prestart' },
    dnsNames: [],
    ipAddresses: [],
  });
});

test('out of the cluster the certificate names the host of the URL the apiserver calls', (t) => {
  const service = { name: 'knative-prestart-gate', namespace: 'knative-prestart', port: 443 };
  t.deepEqual(servingIdentity({ ...base, service, urlBase: 'https://127.0.0.1:18443' }), { dnsNames: [], ipAddresses: ['127.0.0.1'] });
  t.deepEqual(servingIdentity({ ...base, urlBase: 'https://gate.example:8443' }), { dnsNames: ['gate.example'], ipAddresses: [] });
  t.deepEqual(servingIdentity({ ...base, urlBase: 'https://[::1]:8443' }), { dnsNames: [], ipAddresses: ['::1'] });
  t.deepEqual(
    servingIdentity(base),
    { dnsNames: [], ipAddresses: ['127.0.0.1'] },
    'listening everywhere: the local apiserver uses loopback',
  );
});

test('the default gate keeps the installed names; other instances get their own', (t) => {
  t.is(webhookConfigurationName('default'), 'knative-prestart');
  t.is(certSecretName('default'), 'knative-prestart-webhook-certs');
  t.is(webhookConfigurationName('t1'), 'knative-prestart-t1');
  t.is(certSecretName('t1'), 'knative-prestart-webhook-certs-t1');
});
