// uninstall (gate/uninstall.ts) finds what to delete by the label app.kubernetes.io/part-of, but
// names what --keep-held leaves so held Revisions stay held: those names must be in config/.
import { readdirSync, readFileSync } from 'node:fs';
import { parseManifests } from '@knative-prestart/devcluster/apply.ts';
import test from 'ava';
import { KEPT_FOR_HELD, STAMP_POLICY } from '../../../gate/uninstall.ts';

const dir = new URL('../../../config/', import.meta.url);
const docs = readdirSync(dir)
  .filter((f) => /^\d{3}-.*\.yaml$/.test(f))
  .flatMap((f) => parseManifests(readFileSync(new URL(f, dir), 'utf8')));
const names = (kind: string) => docs.filter((d) => d.kind === kind).map((d) => d.metadata?.name);

test('what --keep-held keeps, and the stamp policy it deletes first, are objects of the release', (t) => {
  for (const name of [...KEPT_FOR_HELD.policies, STAMP_POLICY]) {
    t.true(names('ValidatingAdmissionPolicy').includes(name), `policy ${name}`);
    t.true(names('ValidatingAdmissionPolicyBinding').includes(name), `binding ${name}`);
  }
  for (const name of KEPT_FOR_HELD.clusterRoles) t.true(names('ClusterRole').includes(name), `ClusterRole ${name}`);
  for (const name of KEPT_FOR_HELD.clusterRoleBindings) t.true(names('ClusterRoleBinding').includes(name), `ClusterRoleBinding ${name}`);
  for (const d of docs)
    t.is(d.metadata?.labels?.['app.kubernetes.io/part-of'], 'knative-prestart', `${d.kind} ${d.metadata?.name} is found by its label`);
});
