import type { V1Pod } from '@kubernetes/client-node';
import test from 'ava';
import type { Contribution } from '../../../../api/types.ts';
import { type PodView, podPatch } from '../../../../gate/core/inject.ts';
import { applyPatch } from './_jsonpatch.ts';

function pod(): PodView {
  return {
    spec: {
      containers: [{ name: 'user-container', env: [{ name: 'PORT', value: '8080' }] }, { name: 'queue-proxy' }],
    },
  };
}

const env: Contribution = { name: 'db', secretName: 'db-credentials', as: 'env', env: { DB_URL: 'url' } };
const envFrom: Contribution = { name: 'all', secretName: 'app-config', as: 'envFrom' };
const volume: Contribution = { name: 'tls', secretName: 'db-tls', as: 'volume' };

test('env contributions become secretKeyRef env vars in user containers only', (t) => {
  const after = applyPatch(pod(), podPatch(pod(), [env]));
  t.deepEqual(after.spec.containers[0]?.env, [
    { name: 'PORT', value: '8080' },
    { name: 'DB_URL', valueFrom: { secretKeyRef: { name: 'db-credentials', key: 'url' } } },
  ]);
  t.deepEqual(after.spec.containers[1], { name: 'queue-proxy' }, 'queue-proxy is left alone');
});

test('envFrom contributions reference the whole Secret', (t) => {
  const after = applyPatch(pod(), podPatch(pod(), [envFrom]));
  t.deepEqual(after.spec.containers[0]?.envFrom, [{ secretRef: { name: 'app-config' } }]);
});

test('volume contributions follow servicebinding.io: read-only mount under SERVICE_BINDING_ROOT', (t) => {
  const after = applyPatch(pod(), podPatch(pod(), [volume]));
  t.deepEqual(after.spec.volumes, [{ name: 'prestart-tls', secret: { secretName: 'db-tls' } }]);
  const c = after.spec.containers[0];
  t.deepEqual(c?.volumeMounts, [{ name: 'prestart-tls', mountPath: '/bindings/tls', readOnly: true }]);
  t.deepEqual(
    c?.env?.find((e) => e.name === 'SERVICE_BINDING_ROOT'),
    { name: 'SERVICE_BINDING_ROOT', value: '/bindings' },
  );
  t.is(after.spec.containers[1]?.volumeMounts, undefined);
});

test('a container that already sets SERVICE_BINDING_ROOT gets its bindings there', (t) => {
  const p: PodView = {
    spec: {
      containers: [{ name: 'app', env: [{ name: 'SERVICE_BINDING_ROOT', value: '/var/run/bindings/' }] }],
      volumes: [{ name: 'data' }],
    },
  };
  const after = applyPatch(p, podPatch(p, [volume], '/ignored'));
  t.deepEqual(after.spec.containers[0]?.volumeMounts, [{ name: 'prestart-tls', mountPath: '/var/run/bindings/tls', readOnly: true }]);
  t.is(after.spec.containers[0]?.env?.length, 1);
  t.deepEqual(
    after.spec.volumes?.map((v) => v.name),
    ['data', 'prestart-tls'],
  );
});

test('patching an already patched pod adds nothing', (t) => {
  const all = [env, envFrom, volume, { ...volume, name: 'ca', secretName: 'ca' }];
  const once = applyPatch(pod(), podPatch(pod(), all, '/b'));
  t.deepEqual(podPatch(once, all, '/b'), []);
  const twiceInOne = podPatch(pod(), [env, env, volume, volume]);
  const after = applyPatch(pod(), twiceInOne);
  t.is(after.spec.volumes?.length, 1);
  t.is(after.spec.containers[0]?.env?.filter((e) => e.name === 'DB_URL').length, 1);
});

test("the user's own env var of the same name wins", (t) => {
  const p: PodView = { spec: { containers: [{ name: 'app', env: [{ name: 'DB_URL', value: 'postgres://local' }] }] } };
  t.deepEqual(podPatch(p, [env]), []);
});

test('appends to existing lists rather than replacing them', (t) => {
  const p: PodView = {
    spec: {
      containers: [
        {
          name: 'app',
          envFrom: [{ secretRef: { name: 'mine' } }],
          volumeMounts: [{ name: 'data', mountPath: '/data' }],
        },
      ],
    },
  };
  const ops = podPatch(p, [envFrom, volume]);
  t.true(ops.filter((op) => op.path.startsWith('/spec/containers/0/')).some((op) => op.path.endsWith('/-')));
  const after = applyPatch(p, ops);
  t.deepEqual(after.spec.containers[0]?.envFrom, [{ secretRef: { name: 'mine' } }, { secretRef: { name: 'app-config' } }]);
  t.is(after.spec.containers[0]?.volumeMounts?.length, 2);
});

test('takes a client-node V1Pod as it is', (t) => {
  const v1: V1Pod = { spec: { containers: [{ name: 'app', image: 'dev.local/app' }] } };
  if (!v1.spec) throw new Error('no spec');
  t.is(podPatch({ spec: v1.spec }, [envFrom]).length, 1);
});
