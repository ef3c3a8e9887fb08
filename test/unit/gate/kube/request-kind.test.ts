// The gate's apiserver-request histogram labels a call as the apiserver's own metrics do, and never
// with a name from the path (that would grow without bound).
import test from 'ava';
import { kubeRequestKind } from '../../../../gate/kube/request-kind.ts';

const runs = '/apis/prestart.dev/v1alpha1/namespaces/shop/prestartruns';
const revision = '/apis/serving.knative.dev/v1/namespaces/shop/revisions/checkout-00001';

/** [method, path, verb, resource] */
const cases: Record<string, [string, string, string, string][]> = {
  'the writes that hold and release a Revision': [
    ['POST', runs, 'create', 'prestartruns'],
    ['PUT', `${runs}/checkout-00001/status`, 'update', 'prestartruns/status'],
    ['PATCH', revision, 'patch', 'revisions'],
    ['PATCH', `${revision}/status`, 'patch', 'revisions/status'],
    ['POST', '/api/v1/namespaces/shop/events', 'create', 'events'],
    ['PUT', '/apis/coordination.k8s.io/v1/namespaces/knative-prestart/leases/gate', 'update', 'leases'],
  ],
  'reads: a named GET is a get, a collection GET a list, cluster-scoped or namespaced': [
    ['GET', '/apis/prestart.dev/v1alpha1/prestartruns', 'list', 'prestartruns'],
    ['GET', '/api/v1/namespaces/shop', 'get', 'namespaces'],
    ['GET', '/api/v1/namespaces', 'list', 'namespaces'],
    ['PUT', '/api/v1/namespaces/shop/finalize', 'update', 'namespaces/finalize'],
    ['GET', '/api/v1/namespaces/knative-prestart/secrets/keys?resourceVersion=0', 'get', 'secrets'],
  ],
  'anything else is "other", never a piece of the path': [
    ['GET', '/healthz', 'list', 'other'],
    ['GET', '/apis/prestart.dev', 'list', 'other'],
    ['OPTIONS', '/api/v1/namespaces/shop/pods/p', 'other', 'pods'],
  ],
};

for (const [title, rows] of Object.entries(cases)) {
  test(title, (t) => {
    for (const [method, path, verb, resource] of rows) t.deepEqual(kubeRequestKind(method, path), { verb, resource }, `${method} ${path}`);
  });
}
