// The PrestartHook examples of docs/hooks.md's "Built-in hooks" section, as the apiserver sees
// them (dry run): an example that the CRD refuses would send readers astray.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { installedCluster } from '@knative-prestart/devcluster/gate/env.ts';
import { CustomObjectsApi } from '@kubernetes/client-node';
import test from 'ava';
import yaml from 'js-yaml';

const doc = readFileSync(fileURLToPath(new URL('../../../../docs/hooks.md', import.meta.url)), 'utf8');
const section = doc.slice(doc.indexOf('\n## Built-in hooks'));
type Manifest = { kind?: string; metadata?: { name?: string } };
const examples = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)]
  .flatMap((m) => yaml.loadAll(m[1] ?? '') as Manifest[])
  .filter((o) => o?.kind === 'PrestartHook');

test('docs/hooks.md has a PrestartHook example for each built-in hook, and the CRD accepts each', async (t) => {
  t.deepEqual(
    examples.map((e) => e.metadata?.name),
    ['db-migrate', 'orders-db-credentials', 'production-approval'],
  );
  const custom = (await installedCluster()).kubeConfig.makeApiClient(CustomObjectsApi);
  for (const body of examples) {
    await t.notThrowsAsync(
      custom.createClusterCustomObject({ group: 'prestart.dev', version: 'v1alpha1', plural: 'prestarthooks', body, dryRun: 'All' }),
      body.metadata?.name,
    );
  }
});
