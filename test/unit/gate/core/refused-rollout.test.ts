import test from 'ava';
import type { ConfigurationObject } from '../../../../api/resources.ts';
import { retryTarget } from '../../../../gate/core/refused-rollout.ts';

const REFUSED_BY_POLICY =
  'Revision creation failed with message: failed to create Revision: revisions.serving.knative.dev "shop-00002" is forbidden: ' +
  "ValidatingAdmissionPolicy 'prestart-stamp-revisions' with binding 'prestart-stamp-revisions' denied request: knative-prestart: " +
  'Revision shop-00002 matches PrestartHook db but was not held for it.';
const REFUSED_BY_WEBHOOK =
  'Revision creation failed with message: failed to create Revision: admission webhook "revisions.prestart.dev" denied the request: ' +
  'knative-prestart: the namespace cache is not synced yet; nothing was created, retry.';

function configuration(
  ready: { status: 'True' | 'False' | 'Unknown'; reason?: string; message?: string },
  latest?: string,
): ConfigurationObject {
  return {
    metadata: { namespace: 'shop', name: 'shop' },
    status: {
      ...(latest ? { latestCreatedRevisionName: latest } : {}),
      conditions: [{ type: 'Ready', lastTransitionTime: '2026-12-05T00:00:00Z', ...ready }],
    },
  };
}

test('a create the stamp policy or the webhook refused: the latest Revision is the one to annotate', (t) => {
  for (const message of [REFUSED_BY_POLICY, REFUSED_BY_WEBHOOK]) {
    t.deepEqual(retryTarget(configuration({ status: 'False', reason: 'RevisionFailed', message }, 'shop-00001')), {
      kind: 'revision',
      namespace: 'shop',
      configuration: 'shop',
      revision: 'shop-00001',
    });
  }
});

test('a refused first Revision has nothing to annotate', (t) => {
  t.deepEqual(retryTarget(configuration({ status: 'False', reason: 'RevisionFailed', message: REFUSED_BY_POLICY })), {
    kind: 'no-revision',
    namespace: 'shop',
    configuration: 'shop',
  });
});

test('nothing to do for a Ready Configuration, another failure, or a refusal by someone else', (t) => {
  const cases = [
    configuration({ status: 'True' }, 'shop-00001'),
    configuration({ status: 'Unknown' }, 'shop-00001'),
    configuration(
      { status: 'False', reason: 'RevisionFailed', message: 'Revision creation failed with message: quota exceeded.' },
      'shop-00001',
    ),
    configuration({ status: 'False', reason: 'RevisionMissing', message: 'knative-prestart in a message, another reason' }, 'shop-00001'),
    { metadata: { namespace: 'shop', name: 'shop' } },
  ];
  for (const c of cases) t.is(retryTarget(c), undefined, JSON.stringify(c.status));
});
