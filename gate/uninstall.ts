// Removing knative-prestart from a cluster, in the one order that neither starts a held Revision
// by accident nor strands anything (`knative-prestart uninstall`, cli/uninstall.ts):
//   1. stop the gate: scale its Deployment to 0 and wait for its pods and for every gate Lease to
//      be free. A running replica writes its webhook configuration back (on start and at every
//      certificate check), so nothing below would last while one runs;
//   2. stop stamping and injecting: delete the MutatingWebhookConfigurations, then the stamp
//      policy, so new Revisions are created as if knative-prestart had never been installed;
//   3. the held Revisions, as the admin chose: released (hold label, reason and finalizer removed;
//      Knative creates their Deployments at once, without the hooks that had not finished), or
//      kept held (only the finalizer goes, and the hold policies stay: they start when an admin
//      removes the label). Either way they, and their namespaces, can be deleted again;
//   4. the rest, dependents first: finalizers of PrestartRuns, the gate's Triggers, the admission
//      policies and their bindings, RBAC, the CRDs (the apiserver deletes every PrestartHook and
//      PrestartRun with them; the stamp policy names PrestartHook as its parameter, so it goes
//      before), and the gate's namespace.
// Without `yes` it reads the cluster and prints that plan, changing nothing.
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AppsV1Api,
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { errorLine, isConflict, isNotFound } from '../api/kube-errors.ts';
import { REVISIONS, type RevisionObject, RUNS, type RunObject } from '../api/resources.ts';
import { CANCEL_FINALIZER, HOLD_LABEL, REASON_ANNOTATION } from '../api/types.ts';

export const PART_OF = 'app.kubernetes.io/part-of=knative-prestart';
const GATE_PODS = 'app.kubernetes.io/name=knative-prestart-gate';
const LEASE_PREFIX = 'knative-prestart-gate-';
export const STAMP_POLICY = 'prestart-stamp-revisions';
const TRIGGERS = { group: 'eventing.knative.dev', version: 'v1', plural: 'triggers' };
const MANAGED_TRIGGERS = 'app.kubernetes.io/managed-by=knative-prestart';
const FIELD_MANAGER = 'knative-prestart-uninstall';

/**
 * What --keep-held leaves in place so held Revisions stay held: the hold itself, who may lift it
 * (the verb `release`), that only Knative makes a Revision's Deployment, and that only Knative
 * writes the status it builds Deployments from (the resolved digests) (config/200-hold-policy.yaml,
 * config/300-rbac.yaml; a unit test keeps these names in step with those files).
 */
export const KEPT_FOR_HELD = {
  policies: ['prestart-hold-deployments', 'prestart-protect-revisions', 'prestart-revision-deployments', 'prestart-knative-status'],
  clusterRoles: ['knative-prestart-force-release', 'knative-prestart-knative-serving'],
  clusterRoleBindings: ['knative-prestart-knative-serving'],
} as const;

export interface UninstallOptions {
  kubeConfig: KubeConfig;
  /** The gate's namespace. */
  namespace: string;
  held: 'release' | 'keep';
  /** Do it; otherwise only print the plan. */
  yes: boolean;
  /** How long to wait for the gate's pods to go and its Leases to be free. */
  timeoutSeconds: number;
  out(line: string): void;
}

interface HeldRevision {
  namespace: string;
  name: string;
  held: boolean;
}

interface Step {
  title: string;
  run(): Promise<void>;
}

export async function uninstall(opts: UninstallOptions): Promise<void> {
  const kc = opts.kubeConfig;
  const api = {
    apps: kc.makeApiClient(AppsV1Api),
    core: kc.makeApiClient(CoreV1Api),
    leases: kc.makeApiClient(CoordinationV1Api),
    admission: kc.makeApiClient(AdmissionregistrationV1Api),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    crds: kc.makeApiClient(ApiextensionsV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
  const keep = opts.held === 'keep';
  const ns = opts.namespace;
  const names = <T extends { metadata?: { name?: string } }>(items: T[]) => items.map((i) => i.metadata?.name ?? '');
  const served = await servedResources(kc);

  // What there is, read once for the plan.
  const gates = (await api.apps.listNamespacedDeployment({ namespace: ns, labelSelector: GATE_PODS }).catch(absentAsEmpty)).items;
  const leases = names((await api.leases.listNamespacedLease({ namespace: ns }).catch(absentAsEmpty)).items).filter((n) =>
    n.startsWith(LEASE_PREFIX),
  );
  const webhooks = names((await api.admission.listMutatingWebhookConfiguration({ labelSelector: PART_OF })).items);
  const stampers = await mutatingPolicies(api.custom);
  const revisions = served.has('revisions.serving.knative.dev') ? await heldRevisions(api.custom) : [];
  const policies = names((await api.admission.listValidatingAdmissionPolicy({ labelSelector: PART_OF })).items);
  const bindings = names((await api.admission.listValidatingAdmissionPolicyBinding({ labelSelector: PART_OF })).items);
  const removable = (list: string[], kept: readonly string[]) => list.filter((n) => !(keep && kept.includes(n)));
  const clusterRoles = removable(names((await api.rbac.listClusterRole({ labelSelector: PART_OF })).items), KEPT_FOR_HELD.clusterRoles);
  // Ours, and those an admin made to our ClusterRoles (README, the built-in hooks), in any namespace.
  const clusterRoleBindings = removable(
    names(
      (await api.rbac.listClusterRoleBinding({})).items.filter(
        (b) => b.metadata?.labels?.['app.kubernetes.io/part-of'] === 'knative-prestart' || clusterRoles.includes(b.roleRef.name),
      ),
    ),
    KEPT_FOR_HELD.clusterRoleBindings,
  );
  const roleBindings = (await api.rbac.listRoleBindingForAllNamespaces({})).items
    .filter((b) => b.roleRef.kind === 'ClusterRole' && clusterRoles.includes(b.roleRef.name) && b.metadata?.namespace !== ns)
    .map((b) => ({ namespace: b.metadata?.namespace ?? '', name: b.metadata?.name ?? '' }));
  const crds = names((await api.crds.listCustomResourceDefinition({ labelSelector: PART_OF })).items);
  const triggers = served.has('triggers.eventing.knative.dev') ? await managedTriggers(api.custom) : [];
  const namespaceExists = await api.core.readNamespace({ name: ns }).then(
    () => true,
    (err: unknown) => (isNotFound(err) ? false : Promise.reject(err)),
  );
  const stampPolicy = policies.includes(STAMP_POLICY) || bindings.includes(STAMP_POLICY);
  const otherPolicies = removable(
    policies.filter((p) => p !== STAMP_POLICY),
    KEPT_FOR_HELD.policies,
  );
  const otherBindings = removable(
    bindings.filter((p) => p !== STAMP_POLICY),
    KEPT_FOR_HELD.policies,
  );

  const steps: Step[] = [
    {
      title:
        gates.length === 0 && leases.length === 0
          ? 'stop the gate: no gate Deployment or Lease found'
          : `stop the gate: scale ${gates.map((d) => `deployment ${ns}/${d.metadata?.name}`).join(', ') || 'no Deployment'} to 0, ` +
            `wait until its pods are gone and ${leases.map((l) => `Lease ${ns}/${l}`).join(', ') || 'no Lease'} is free`,
      run: async () => {
        for (const d of gates) {
          await api.apps.patchNamespacedDeployment(
            { name: d.metadata?.name ?? '', namespace: ns, body: { spec: { replicas: 0 } }, fieldManager: FIELD_MANAGER },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          );
        }
        await until(opts.timeoutSeconds, `the pods of the gate (${GATE_PODS}) to be gone`, async () => {
          const pods = await api.core.listNamespacedPod({ namespace: ns, labelSelector: GATE_PODS });
          return pods.items.length === 0;
        });
        await leasesFree(api.leases, ns, leases, opts.timeoutSeconds);
      },
    },
    {
      title: `stop stamping and injecting: delete ${list('mutatingwebhookconfiguration', webhooks)}; ${list(
        'mutatingadmissionpolicybinding',
        stampers.bindings,
      )}; ${list('mutatingadmissionpolicy', stampers.policies)}`,
      run: async () => {
        for (const name of webhooks) await gone(api.admission.deleteMutatingWebhookConfiguration({ name }));
        // The apiserver's stamp goes with the webhook: left without PrestartHooks (their CRD is
        // deleted last) its binding would fail every Revision create (failurePolicy Fail).
        for (const name of stampers.bindings) await gone(api.custom.deleteClusterCustomObject({ ...MUTATING_POLICY_BINDINGS, name }));
        for (const name of stampers.policies) await gone(api.custom.deleteClusterCustomObject({ ...MUTATING_POLICIES, name }));
      },
    },
    {
      title: stampPolicy
        ? `let new Revisions start unheld: delete validatingadmissionpolicybinding and validatingadmissionpolicy ${STAMP_POLICY}`
        : 'let new Revisions start unheld: the stamp policy is not installed',
      run: async () => {
        await gone(api.admission.deleteValidatingAdmissionPolicyBinding({ name: STAMP_POLICY }));
        await gone(api.admission.deleteValidatingAdmissionPolicy({ name: STAMP_POLICY }));
      },
    },
    {
      title: heldTitle(revisions, keep),
      run: async () => {
        for (const r of revisions) await releaseOrUnblock(api.custom, r, keep);
      },
    },
    {
      title: 'remove the finalizers of PrestartRuns, if any',
      run: async () => {
        if (served.has('prestartruns.prestart.dev')) await dropRunFinalizers(api.custom);
      },
    },
    {
      title: `delete the gate's Triggers: ${triggers.length === 0 ? 'none' : triggers.map((t) => `${t.namespace}/${t.name}`).join(', ')}`,
      run: async () => {
        for (const t of triggers) await gone(api.custom.deleteNamespacedCustomObject({ ...TRIGGERS, ...t }));
      },
    },
    {
      title: `delete the admission policies: ${list('validatingadmissionpolicybinding', otherBindings)}; ${list('validatingadmissionpolicy', otherPolicies)}`,
      run: async () => {
        for (const name of otherBindings) await gone(api.admission.deleteValidatingAdmissionPolicyBinding({ name }));
        for (const name of otherPolicies) await gone(api.admission.deleteValidatingAdmissionPolicy({ name }));
      },
    },
    {
      title: `delete RBAC: ${list('clusterrolebinding', clusterRoleBindings)}; ${list(
        'rolebinding',
        roleBindings.map((b) => `${b.namespace}/${b.name}`),
      )}; ${list('clusterrole', clusterRoles)}`,
      run: async () => {
        for (const name of clusterRoleBindings) await gone(api.rbac.deleteClusterRoleBinding({ name }));
        for (const b of roleBindings) await gone(api.rbac.deleteNamespacedRoleBinding(b));
        for (const name of clusterRoles) await gone(api.rbac.deleteClusterRole({ name }));
      },
    },
    {
      title: `delete ${list('customresourcedefinition', crds)} (with every PrestartHook and PrestartRun)`,
      run: async () => {
        for (const name of crds) await gone(api.crds.deleteCustomResourceDefinition({ name }));
        // The apiserver deletes every PrestartHook and PrestartRun before the CRD goes. Wait for
        // it: a namespace deleted while a CRD is terminating waits on the namespace controller's
        // retries, and an install run right after would meet both still terminating.
        await until(opts.timeoutSeconds, `${list('customresourcedefinition', crds)} to be gone`, async () => {
          const left = await api.crds.listCustomResourceDefinition({ labelSelector: PART_OF });
          return left.items.length === 0;
        });
      },
    },
    {
      title: namespaceExists
        ? `delete namespace ${ns} (the gate's and the built-in hooks' Deployments, Services, Secrets, Leases)`
        : `namespace ${ns} does not exist`,
      run: async () => {
        if (namespaceExists) await gone(api.core.deleteNamespace({ name: ns }));
      },
    },
  ];

  opts.out(`knative-prestart uninstall (${keep ? '--keep-held' : '--release-held'}), in this order:`);
  for (const [i, s] of steps.entries()) opts.out(`  ${i + 1}. ${s.title}`);
  if (keep) opts.out(keptNote());
  if (!opts.yes) {
    opts.out('Nothing was changed. Run again with --yes to do it.');
    return;
  }
  await checkRights(kc, ns);
  for (const [i, s] of steps.entries()) {
    await s.run();
    opts.out(`done ${i + 1}/${steps.length}`);
  }
  // A gate running outside the Deployment (and so not seen in step 1) would have written its
  // configuration back by now only if it restarted; say so rather than report success.
  const back = names((await api.admission.listMutatingWebhookConfiguration({ labelSelector: PART_OF })).items);
  if (back.length > 0)
    throw new Error(
      `mutatingwebhookconfiguration ${back.join(', ')} came back: a gate still runs somewhere; stop it and run uninstall again`,
    );
  opts.out('knative-prestart is uninstalled.');
}

function list(kind: string, items: readonly string[]): string {
  return items.length === 0 ? `no ${kind}` : `${kind} ${items.join(', ')}`;
}

function heldTitle(revisions: HeldRevision[], keep: boolean): string {
  const held = revisions.filter((r) => r.held);
  const names = (rs: HeldRevision[]) => rs.map((r) => `${r.namespace}/${r.name}`).join(', ');
  if (revisions.length === 0) return 'held Revisions: none';
  if (keep) {
    return `keep ${held.length} held Revision(s) held, and remove the finalizer ${CANCEL_FINALIZER} so they and their namespaces can be deleted: ${names(revisions)}`;
  }
  return `release ${held.length} held Revision(s) (remove the hold label, reason and finalizer; Knative creates their Deployments at once, without the hooks that had not finished): ${names(revisions)}`;
}

function keptNote(): string {
  return [
    '  Kept, so held Revisions stay held (remove them once no Revision is held any more):',
    `    validatingadmissionpolicy and validatingadmissionpolicybinding ${KEPT_FOR_HELD.policies.join(', ')}`,
    `    clusterrole ${KEPT_FOR_HELD.clusterRoles.join(', ')}; clusterrolebinding ${KEPT_FOR_HELD.clusterRoleBindings.join(', ')}`,
    '  To start a held Revision later: kubectl label revision NAME -n NAMESPACE prestart.dev/hold-   (as a cluster admin)',
  ].join('\n');
}

/** Revisions the gate left a mark on that would hold them or block their deletion. */
async function heldRevisions(custom: CustomObjectsApi): Promise<HeldRevision[]> {
  const out: HeldRevision[] = [];
  let cont: string | undefined;
  do {
    const page = (await custom.listClusterCustomObject({ ...REVISIONS, limit: 500, _continue: cont })) as {
      items: RevisionObject[];
      metadata?: { _continue?: string; continue?: string };
    };
    for (const r of page.items) {
      const held = r.metadata?.labels?.[HOLD_LABEL] !== undefined;
      if (held || (r.metadata?.finalizers ?? []).includes(CANCEL_FINALIZER)) {
        out.push({ namespace: r.metadata?.namespace ?? '', name: r.metadata?.name ?? '', held });
      }
    }
    cont = page.metadata?.continue ?? page.metadata?._continue;
  } while (cont);
  return out;
}

/** Conditional on the Revision as read, so a finalizer another party adds meanwhile is never dropped. */
async function releaseOrUnblock(custom: CustomObjectsApi, r: HeldRevision, keep: boolean): Promise<void> {
  for (;;) {
    let current: RevisionObject;
    try {
      current = (await custom.getNamespacedCustomObject({ ...REVISIONS, ...r })) as RevisionObject;
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    const md = current.metadata ?? {};
    const patch = {
      metadata: {
        resourceVersion: md.resourceVersion,
        finalizers: (md.finalizers ?? []).filter((f) => f !== CANCEL_FINALIZER),
        ...(keep ? {} : { labels: { [HOLD_LABEL]: null }, annotations: { [REASON_ANNOTATION]: null } }),
      },
    };
    try {
      await custom.patchNamespacedCustomObject(
        { ...REVISIONS, ...r, body: patch, fieldManager: FIELD_MANAGER },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      return;
    } catch (err) {
      if (isNotFound(err)) return;
      if (!isConflict(err)) throw new Error(`Revision ${r.namespace}/${r.name}: ${errorLine(err)}`);
    }
  }
}

async function dropRunFinalizers(custom: CustomObjectsApi): Promise<void> {
  const runs = ((await custom.listClusterCustomObject({ ...RUNS })) as { items: RunObject[] }).items;
  for (const run of runs.filter((r) => (r.metadata?.finalizers ?? []).length > 0)) {
    await gone(
      custom.patchNamespacedCustomObject(
        {
          ...RUNS,
          namespace: run.metadata?.namespace ?? '',
          name: run.metadata?.name ?? '',
          body: { metadata: { finalizers: null } },
          fieldManager: FIELD_MANAGER,
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      ),
    );
  }
}

async function managedTriggers(custom: CustomObjectsApi): Promise<{ namespace: string; name: string }[]> {
  const { items } = (await custom.listClusterCustomObject({ ...TRIGGERS, labelSelector: MANAGED_TRIGGERS })) as {
    items: KubernetesObject[];
  };
  return items.map((t) => ({ namespace: t.metadata?.namespace ?? '', name: t.metadata?.name ?? '' }));
}

/**
 * A Lease is free once nobody holds it, or once it has not changed for its duration as this
 * process watched it (client-go's rule: the holder's clock is not ours).
 */
async function leasesFree(api: CoordinationV1Api, namespace: string, names: string[], timeoutSeconds: number): Promise<void> {
  const seen = new Map<string, { version: string; since: number }>();
  await until(timeoutSeconds, `${names.map((n) => `Lease ${namespace}/${n}`).join(', ')} to be free`, async () => {
    for (const name of names) {
      const lease = await api
        .readNamespacedLease({ name, namespace })
        .catch((err: unknown) => (isNotFound(err) ? undefined : Promise.reject(err)));
      if (!lease?.spec?.holderIdentity) continue;
      const version = lease.metadata?.resourceVersion ?? '';
      const last = seen.get(name);
      if (!last || last.version !== version) {
        seen.set(name, { version, since: Date.now() });
        return false;
      }
      if (Date.now() - last.since < (lease.spec.leaseDurationSeconds ?? 15) * 1000) return false;
    }
    return true;
  }).catch((err: unknown) => {
    const holders = [...seen.keys()].join(', ');
    throw new Error(
      `${errorLine(err)}; Lease ${holders} is still renewed: a gate runs outside the Deployment (stop it, then run uninstall again; nothing after step 1 was done)`,
    );
  });
}

/** Polls `done` every second until it holds or `timeoutSeconds` pass. */
async function until(timeoutSeconds: number, what: string, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    if (await done()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutSeconds}s waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** A delete (or patch) of something already gone is done. */
async function gone(request: Promise<unknown>): Promise<void> {
  await request.catch((err: unknown) => {
    if (!isNotFound(err)) throw new Error(errorLine(err));
  });
}

function absentAsEmpty(err: unknown): { items: never[] } {
  if (isNotFound(err)) return { items: [] };
  throw err;
}

const MUTATING_POLICIES = { group: 'admissionregistration.k8s.io', version: 'v1', plural: 'mutatingadmissionpolicies' };
const MUTATING_POLICY_BINDINGS = { ...MUTATING_POLICIES, plural: 'mutatingadmissionpolicybindings' };

/**
 * The apiserver's stamp (config/230), where the apiserver serves MutatingAdmissionPolicy v1 (a
 * cluster that does not answers 404: nothing to delete). Read through the generic object API: the
 * Kubernetes client's typed API predates the kind's v1.
 */
async function mutatingPolicies(custom: CustomObjectsApi): Promise<{ policies: string[]; bindings: string[] }> {
  const named = async (ref: typeof MUTATING_POLICIES) =>
    (
      (await custom.listClusterCustomObject({ ...ref, labelSelector: PART_OF }).catch(absentAsEmpty)) as { items: KubernetesObject[] }
    ).items.map((i) => i.metadata?.name ?? '');
  return { policies: await named(MUTATING_POLICIES), bindings: await named(MUTATING_POLICY_BINDINGS) };
}

/** plural.group of every resource the apiserver serves, so absent kinds (no Knative Eventing) are skipped. */
async function servedResources(kc: KubeConfig): Promise<Set<string>> {
  const crds = (await kc.makeApiClient(ApiextensionsV1Api).listCustomResourceDefinition()).items;
  return new Set(crds.map((c) => c.metadata?.name ?? ''));
}

/** What uninstall needs beyond deleting what it lists: the verb the hold policies ask for. */
async function checkRights(kc: KubeConfig, namespace: string): Promise<void> {
  const authz = kc.makeApiClient(AuthorizationV1Api);
  const wanted = [
    { group: 'prestart.dev', resource: 'prestartruns', verb: 'release' },
    { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions', verb: 'delete' },
    { group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations', verb: 'delete' },
    { group: 'apps', resource: 'deployments', verb: 'patch', namespace },
  ];
  const missing: string[] = [];
  for (const w of wanted) {
    const review = await authz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: w } } });
    if (!review.status?.allowed) missing.push(`${w.verb} ${w.resource}.${w.group}${w.namespace ? ` in ${w.namespace}` : ''}`);
  }
  if (missing.length > 0) {
    throw new Error(
      `you may not ${missing.join(', ')}; uninstall needs a cluster admin (the verb release on prestartruns.prestart.dev is what lets it lift holds: ClusterRole knative-prestart-force-release). Nothing was changed`,
    );
  }
}
