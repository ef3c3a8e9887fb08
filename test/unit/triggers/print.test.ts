import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import yaml from 'js-yaml';
import { desiredTriggers, inClusterGateSubscriber, type TriggerObject } from '../../../triggers/desired.ts';
import { HookFileError, hooksFromYaml, printTriggers } from '../../../triggers/print.ts';

const HOOKS_FILE = fileURLToPath(new URL('./fixtures/hooks.yaml', import.meta.url));
const HOOKS_YAML = readFileSync(HOOKS_FILE, 'utf8');

const docs = (text: string) => yaml.loadAll(text) as TriggerObject[];

test('the printer writes one YAML document per Trigger, the same objects the reconciler applies', (t) => {
  const hooks = hooksFromYaml(HOOKS_YAML, HOOKS_FILE);
  t.deepEqual(
    hooks.map((h) => [h.name, h.spec.delivery.transport]),
    [
      ['db-migrate', 'broker'],
      ['image-scan', 'broker'],
      ['notify', 'http'],
    ],
  );
  const triggers = desiredTriggers(hooks, inClusterGateSubscriber());
  const text = printTriggers(triggers);
  t.true(text.startsWith('---\n'));
  t.deepEqual(docs(text), triggers);
  t.deepEqual(
    docs(text).map((d) => `${d.metadata.namespace}/${d.metadata.name} -> ${JSON.stringify(d.spec.subscriber)}`),
    [
      'shop/prestart-gate-replies-default -> {"uri":"http://knative-prestart-gate.knative-prestart.svc/"}',
      'shop/prestart-hook-db-migrate -> {"ref":{"apiVersion":"serving.knative.dev/v1","kind":"Service","name":"db-migrate-hook"}}',
      'shop/prestart-hook-image-scan -> {"uri":"http://scanner.security.svc.cluster.local/scan"}',
    ],
  );
});

test('ownerReferences are left out unless asked for', (t) => {
  const hooks = hooksFromYaml(HOOKS_YAML.replace('name: db-migrate\n', 'name: db-migrate\n  uid: 0b7e0b7e-0000-4000-8000-000000000001\n'));
  const triggers = desiredTriggers(hooks, inClusterGateSubscriber());
  t.false(printTriggers(triggers).includes('ownerReferences'));
  const withOwners = docs(printTriggers(triggers, { ownerReferences: true }));
  t.deepEqual(withOwners.find((d) => d.metadata.name === 'prestart-hook-db-migrate')?.metadata.ownerReferences, [
    { apiVersion: 'prestart.dev/v1alpha1', kind: 'PrestartHook', name: 'db-migrate', uid: '0b7e0b7e-0000-4000-8000-000000000001' },
  ]);
});

test('a List of hooks (kubectl get -o yaml) is read too', (t) => {
  const list = yaml.dump({ apiVersion: 'v1', kind: 'List', items: docs(HOOKS_YAML).slice(0, 2) });
  t.deepEqual(
    hooksFromYaml(list).map((h) => h.name),
    ['db-migrate', 'image-scan'],
  );
});

test('no Broker hooks, no documents', (t) => {
  t.is(printTriggers(desiredTriggers(hooksFromYaml(HOOKS_YAML.split('---')[2] ?? ''), inClusterGateSubscriber())), '');
});

test('a Broker hook without its Broker is refused with the place it is in', (t) => {
  const bad = 'apiVersion: prestart.dev/v1alpha1\nkind: PrestartHook\nmetadata: {name: x}\nspec:\n  delivery: {transport: broker}\n';
  t.throws(() => hooksFromYaml(`${HOOKS_YAML}---\n${bad}`, 'hooks.yaml'), {
    instanceOf: HookFileError,
    message: /hooks\.yaml document 5: PrestartHook x has transport broker but no delivery\.broker/,
  });
  t.throws(() => hooksFromYaml('a: [', 'broken.yaml'), { instanceOf: HookFileError, message: /^broken\.yaml: not YAML/ });
});
