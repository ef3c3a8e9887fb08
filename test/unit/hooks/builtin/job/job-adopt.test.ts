// The job hook adopts a Job found under its Job's name only when it runs exactly what the hook's
// own would: the name and labels are predictable, and a namespace editor can create Jobs.
import test from 'ava';
import { adoptionDiff, notAdoptedMessage } from '../../../../../hooks/builtin/job/adopt.ts';
import { buildJob } from '../../../../../hooks/builtin/job/manifest.ts';
import { type JobParams, readJobParams } from '../../../../../hooks/builtin/job/params.ts';

const params = (p: Record<string, unknown>): JobParams => {
  const read = readJobParams(p);
  if (Array.isArray(read)) throw new Error(read.join('; '));
  return read;
};

const manifest = (activeDeadlineSeconds = 600) =>
  buildJob({
    namespace: 'shop',
    revision: { name: 'shop-00002', uid: 'rev-uid' },
    hook: 'db-migrate',
    attempt: 2,
    image: `registry.example/shop@sha256:${'ab'.repeat(32)}`,
    params: params({ useRevisionImage: true, command: ['/app/migrate'], args: ['up'], env: { STEP: 'up' }, podLabels: { team: 'a' } }),
    activeDeadlineSeconds,
  });

/** As the apiserver returns a created Job (or a dry run of it): defaulted, with the Job API's labels. */
// biome-ignore lint/suspicious/noExplicitAny: raw JSON, as the hook reads it
function asServed(job: any, uid: string, name: string): any {
  const copy = structuredClone(job);
  const ids = { 'batch.kubernetes.io/controller-uid': uid, 'controller-uid': uid, 'batch.kubernetes.io/job-name': name, 'job-name': name };
  copy.metadata = { ...copy.metadata, name, uid, creationTimestamp: '2026-01-01T00:00:00Z' };
  copy.spec = {
    ...copy.spec,
    completions: 1,
    parallelism: 1,
    completionMode: 'NonIndexed',
    suspend: false,
    podReplacementPolicy: 'TerminatingOrFailed',
    selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } },
  };
  copy.spec.template.metadata = { ...copy.spec.template.metadata, creationTimestamp: null };
  copy.spec.template.metadata.labels = { ...copy.spec.template.metadata.labels, ...ids };
  copy.spec.template.spec = {
    ...copy.spec.template.spec,
    dnsPolicy: 'ClusterFirst',
    schedulerName: 'default-scheduler',
    securityContext: {},
    terminationGracePeriodSeconds: 30,
  };
  copy.spec.template.spec.containers = copy.spec.template.spec.containers.map((c: object) => ({
    ...c,
    imagePullPolicy: 'IfNotPresent',
    resources: {},
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
  }));
  return copy;
}

const wanted = () => asServed(manifest(), 'dry-run-uid', 'shop-00002-db-migrate-2-x7k2p');

test('the Job the hook made earlier is adopted: only the Job API’s labels and the deadline it set then differ', (t) => {
  const earlier = asServed(manifest(900), 'job-uid', 'shop-00002-db-migrate-2');
  t.deepEqual(adoptionDiff(wanted(), earlier), []);
});

test('a Job with the same name and labels that runs `exit 0` is not adopted, and the message says what differs', (t) => {
  const forged = asServed(manifest(), 'job-uid', 'shop-00002-db-migrate-2');
  forged.spec.template.spec.containers[0].command = ['sh', '-c', 'exit 0'];
  const diff = adoptionDiff(wanted(), forged);
  t.deepEqual(diff, ['containers[0].command']);
  t.is(
    notAdoptedMessage({ namespace: 'shop', name: 'shop-00002-db-migrate-2' }, diff, 'kubectl annotate prestartrun …'),
    'Job shop/shop-00002-db-migrate-2 exists but is not the Job this hook would create (containers[0].command differs): not adopted, ' +
      'and left as it is; delete it (kubectl delete job shop-00002-db-migrate-2 -n shop) and retry: kubectl annotate prestartrun …',
  );
});

test('any change to what runs is seen: image, an extra env var, a volume, a field the client library does not know', (t) => {
  const cases: Array<[string, (j: ReturnType<typeof wanted>) => void, string[]]> = [
    ['image', (j) => (j.spec.template.spec.containers[0].image = 'registry.example/shop:v2'), ['containers[0].image']],
    ['env', (j) => j.spec.template.spec.containers[0].env.push({ name: 'DRY_RUN', value: '1' }), ['containers[0].env']],
    ['env value', (j) => (j.spec.template.spec.containers[0].env[0].value = 'down'), ['containers[0].env[0].value']],
    ['args removed', (j) => delete j.spec.template.spec.containers[0].args, ['containers[0].args']],
    ['init container', (j) => (j.spec.template.spec.initContainers = [{ name: 'x', image: 'busybox' }]), ['initContainers']],
    ['volume', (j) => (j.spec.template.spec.volumes = [{ name: 'v', emptyDir: {} }]), ['volumes']],
    ['unknown field', (j) => (j.spec.template.spec.containers[0].futureField = true), ['containers[0].futureField']],
    ['service account', (j) => (j.spec.template.spec.serviceAccountName = 'admin'), ['serviceAccountName']],
    ['pod label', (j) => delete j.spec.template.metadata.labels.team, ['metadata.labels.team']],
    [
      'pod annotation',
      (j) => (j.spec.template.metadata.annotations['x.example/inject'] = 'yes'),
      ['metadata.annotations["x.example/inject"]'],
    ],
  ];
  for (const [what, change, expected] of cases) {
    const existing = asServed(manifest(), 'job-uid', 'shop-00002-db-migrate-2');
    change(existing);
    t.deepEqual(adoptionDiff(wanted(), existing), expected, what);
  }
});

test('the Job spec fields that decide how often it runs or who counts success are compared; the deadline is not', (t) => {
  const cases: Array<[string, (j: ReturnType<typeof wanted>) => void, string[]]> = [
    ['backoffLimit', (j) => (j.spec.backoffLimit = 6), ['spec.backoffLimit']],
    ['completions', (j) => (j.spec.completions = 3), ['spec.completions']],
    ['manualSelector', (j) => (j.spec.manualSelector = true), ['spec.manualSelector']],
    ['managedBy', (j) => (j.spec.managedBy = 'example.com/mine'), ['spec.managedBy']],
    ['suspend', (j) => (j.spec.suspend = true), ['spec.suspend']],
    ['podFailurePolicy', (j) => (j.spec.podFailurePolicy = { rules: [] }), ['spec.podFailurePolicy']],
    ['activeDeadlineSeconds', (j) => (j.spec.activeDeadlineSeconds = 1), []],
    ['selector', (j) => (j.spec.selector = { matchLabels: { 'batch.kubernetes.io/controller-uid': 'other' } }), []],
  ];
  for (const [what, change, expected] of cases) {
    const existing = asServed(manifest(), 'job-uid', 'shop-00002-db-migrate-2');
    change(existing);
    t.deepEqual(adoptionDiff(wanted(), existing), expected, what);
  }
});

test('null, absent and an empty object are the same; many differences are listed in part', (t) => {
  const existing = asServed(manifest(), 'job-uid', 'shop-00002-db-migrate-2');
  existing.spec.template.spec.nodeSelector = null;
  delete existing.spec.template.spec.securityContext;
  t.deepEqual(adoptionDiff(wanted(), existing), []);
  const message = notAdoptedMessage({ namespace: 'ns', name: 'j' }, ['a', 'b', 'c', 'd', 'e', 'f'], 'retry');
  t.regex(message, /\(a, b, c, d and 2 more differ\)/);
  t.deepEqual(adoptionDiff(wanted(), {}).slice(0, 1), ['the pod spec'], 'a Job with no spec is not ours');
});
