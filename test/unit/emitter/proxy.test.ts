// Which proxy, if any, carries a request to a Broker ingress.
import test from 'ava';
import { isLoopback, proxyFor, redactProxy } from '../../../emitter/proxy.ts';

const ingress = new URL('http://broker-ingress.knative-eventing.svc.cluster.local/shop/default');

test('loopback destinations are recognised as Go does: localhost, 127.0.0.0/8, ::1', (t) => {
  for (const host of ['localhost', 'LOCALHOST', '127.0.0.1', '127.1.2.3', '[::1]', '::1', '[::ffff:127.0.0.1]']) {
    t.true(isLoopback(host), host);
  }
  for (const host of ['128.0.0.1', '10.0.0.1', '[::2]', 'broker-ingress.knative-eventing.svc.cluster.local', 'localhost.example']) {
    t.false(isLoopback(host), host);
  }
});

test('a proxy URL option carries every request except loopback ones; false never proxies', (t) => {
  t.is(proxyFor('http://proxy.corp:3128', ingress), 'http://proxy.corp:3128');
  t.is(proxyFor('http://proxy.corp:3128', new URL('http://127.0.0.1:8080/shop/default')), undefined);
  t.is(proxyFor('http://proxy.corp:3128', new URL('http://[::1]:8080/shop/default')), undefined);
  t.is(proxyFor(false, ingress), undefined);
});

test('a function option decides per URL, and an empty answer means direct', (t) => {
  const seen: string[] = [];
  const choose = (url: string) => {
    seen.push(url);
    return url.includes('/shop/') ? 'http://proxy.corp:3128' : '';
  };
  t.is(proxyFor(choose, ingress), 'http://proxy.corp:3128');
  t.is(proxyFor(choose, new URL('http://broker-ingress.knative-eventing.svc.cluster.local/other/default')), undefined);
  t.deepEqual(seen, [ingress.href, 'http://broker-ingress.knative-eventing.svc.cluster.local/other/default']);
});

test.serial('by default the proxy variables decide, NO_PROXY included, and loopback stays direct', (t) => {
  const names = ['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy'];
  const saved = new Map(names.map((n) => [n, process.env[n]]));
  t.teardown(() => {
    for (const [n, v] of saved) {
      if (v === undefined) delete process.env[n];
      else process.env[n] = v;
    }
  });
  for (const n of names) delete process.env[n];
  t.is(proxyFor(undefined, ingress), undefined, 'nothing set: direct');
  process.env.HTTP_PROXY = 'http://proxy.corp:3128';
  process.env.HTTPS_PROXY = 'http://secure-proxy.corp:3128';
  t.is(proxyFor(undefined, ingress), 'http://proxy.corp:3128');
  t.is(proxyFor(undefined, new URL('https://broker-ingress.example/shop/default')), 'http://secure-proxy.corp:3128');
  t.is(proxyFor(undefined, new URL('http://127.0.0.1:8080/shop/default')), undefined);
  process.env.NO_PROXY = '.svc.cluster.local';
  t.is(proxyFor(undefined, ingress), undefined);
  t.is(proxyFor(undefined, new URL('http://broker.example/shop/default')), 'http://proxy.corp:3128');
});

test('proxy credentials never reach a message', (t) => {
  t.is(redactProxy('http://gate:s3cret@proxy.corp:3128'), 'http://gate:***@proxy.corp:3128');
  t.is(redactProxy('http://127.0.0.1:1234'), 'http://127.0.0.1:1234');
  t.false(redactProxy('not a url with s3cret').includes('s3cret'));
});
