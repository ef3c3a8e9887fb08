// The gate's apiserver-request histogram labels a call as the apiserver's own metrics do, and never
// with a name from the path (that would grow without bound).
import test from 'ava';
import { kubeRequestKind } from '../../../gate/shell/kube-requests.ts';

test('the writes that hold and release a Revision are labelled with the apiserver verb and resource', (t) => {
  const runs = '/apis/prestart.dev/v1alpha1/namespaces/shop/prestartruns';
  t.deepEqual(kubeRequestKind('POST', runs), { verb: 'create', resource: 'prestartruns' });
  t.deepEqual(kubeRequestKind('PUT', `${runs}/checkout-00001/status`), { verb: 'update', resource: 'prestartruns/status' });
  t.deepEqual(kubeRequestKind('PATCH', '/apis/serving.knative.dev/v1/namespaces/shop/revisions/checkout-00001'), {
    verb: 'patch',
    resource: 'revisions',
  });
  t.deepEqual(kubeRequestKind('PATCH', '/apis/serving.knative.dev/v1/namespaces/shop/revisions/checkout-00001/status'), {
    verb: 'patch',
    resource: 'revisions/status',
  });
  t.deepEqual(kubeRequestKind('POST', '/api/v1/namespaces/shop/events'), { verb: 'create', resource: 'events' });
  t.deepEqual(kubeRequestKind('PUT', '/apis/coordination.k8s.io/v1/namespaces/knative-prestart/leases/gate'), {
    verb: 'update',
    resource: 'leases',
  });
});

test('reads: a named GET is a get, a collection GET a list, cluster-scoped or namespaced', (t) => {
  t.deepEqual(kubeRequestKind('GET', '/apis/prestart.dev/v1alpha1/prestartruns'), { verb: 'list', resource: 'prestartruns' });
  t.deepEqual(kubeRequestKind('GET', '/api/v1/namespaces/shop'), { verb: 'get', resource: 'namespaces' });
  t.deepEqual(kubeRequestKind('GET', '/api/v1/namespaces'), { verb: 'list', resource: 'namespaces' });
  t.deepEqual(kubeRequestKind('PUT', '/api/v1/namespaces/shop/finalize'), { verb: 'update', resource: 'namespaces/finalize' });
  t.deepEqual(kubeRequestKind('GET', '/api/v1/namespaces/knative-prestart/secrets/keys?resourceVersion=0'), {
    verb: 'get',
    resource: 'secrets',
  });
});

test('anything else is "other", never a piece of the path', (t) => {
  t.deepEqual(kubeRequestKind('GET', '/healthz'), { verb: 'list', resource: 'other' });
  t.deepEqual(kubeRequestKind('GET', '/apis/prestart.dev'), { verb: 'list', resource: 'other' });
  t.deepEqual(kubeRequestKind('OPTIONS', '/api/v1/namespaces/shop/pods/p'), { verb: 'other', resource: 'pods' });
});
