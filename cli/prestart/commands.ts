// `kn prestart list | get | why | retry | plan | release`: a person's view of held Revisions and the
// admin's controls, in the habits of `kubectl argo rollouts`, with the flags kn and kubectl users
// type by habit (-n, -A, -o json|yaml, --as, --as-group). These commands read PrestartRuns and
// write annotations only (never a spec, so a GitOps tool has nothing to revert); the gate does
// the rest. The text comes from render.ts (pure, unit-tested).
import { readFile } from 'node:fs/promises';
import {
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { type Command, InvalidArgumentError } from 'commander';
import yaml from 'js-yaml';
import { errorLine, isNotFound, statusOf } from '../../api/kube-errors.ts';
import { HOOKS, type HookObject, NAMESPACED_HOOKS, type NamespacedHookObject, RUNS, type RunObject, toHook } from '../../api/resources.ts';
import { FORCE_RELEASE_ANNOTATION, FORCE_RELEASE_BY_ANNOTATION, RETRY_ANNOTATION } from '../../api/types.ts';
import { DEFAULT_CLUSTER_DOMAIN, namespacedHook, runStatusOf } from '../../gate/core/index.ts';
import { whoStamps } from '../../gate/webhooks/stamp-path.ts';
import { cliKubeConfig } from './kubeconfig.ts';
import { renderPlan, type ServiceLike, type Stamper } from './plan.ts';
import { renderRunList, renderRunTree, whyParagraph } from './render.ts';

export interface PrestartIo {
  out(text: string): void;
  setExitCode(code: number): void;
  now(): Date;
}

const processIo: PrestartIo = {
  out: (text) => process.stdout.write(`${text}\n`),
  setExitCode: (code) => {
    process.exitCode = code;
  },
  now: () => new Date(),
};

interface Common {
  namespace?: string;
  kubeconfig?: string;
  as?: string;
  asGroup?: string[];
}

type OutputFormat = 'json' | 'yaml';
interface Output {
  output?: OutputFormat;
}

const gvp = { group: RUNS.group, version: RUNS.version, plural: RUNS.plural };

function target(o: Common): { kc: KubeConfig; api: CustomObjectsApi; namespace: string } {
  const kc = cliKubeConfig(o.kubeconfig, { as: o.as, asGroup: o.asGroup });
  const namespace = o.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
  return { kc, api: kc.makeApiClient(CustomObjectsApi), namespace };
}

function outputFormat(value: string): OutputFormat {
  if (value === 'json' || value === 'yaml') return value;
  throw new InvalidArgumentError(`unknown output format "${value}": json or yaml (the default is the table)`);
}

/** An object as `kubectl get -o json|yaml` prints it: without managedFields. */
function printed(obj: unknown, format: OutputFormat): string {
  const text = JSON.stringify(obj, (key, value) => (key === 'managedFields' ? undefined : value), 2);
  return format === 'json' ? text : yaml.dump(JSON.parse(text), { noRefs: true, lineWidth: -1 }).trimEnd();
}

/** A run as the gate reads it: a just-started run's status is implied by spec.startedAt until stored. */
function withStatus(run: RunObject): RunObject {
  if (run.status || !run.spec) return run;
  const status = runStatusOf(run);
  return status ? { ...run, status } : run;
}

/** The run of a Revision (runs are named after their Revision), with a sentence when there is none. */
async function readRun(api: CustomObjectsApi, namespace: string, revision: string): Promise<RunObject> {
  try {
    return withStatus((await api.getNamespacedCustomObject({ ...gvp, namespace, name: revision })) as RunObject);
  } catch (err) {
    if (isNotFound(err)) {
      throw new CliError(
        `Revision ${revision} in ${namespace} has no PrestartRun: no pre-start hook applies to it, or the gate has not seen it yet (kubectl get revision ${revision} -n ${namespace} -o yaml shows its prestart.dev/hold label)`,
      );
    }
    throw err;
  }
}

async function annotateRun(api: CustomObjectsApi, namespace: string, revision: string, annotations: Record<string, string>): Promise<void> {
  await api.patchNamespacedCustomObject(
    { ...gvp, namespace, name: revision, body: { metadata: { annotations } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** An error the user should read as is (no stack, exit 1). */
export class CliError extends Error {}

function withErrors(io: PrestartIo, action: () => Promise<void>): Promise<void> {
  return action().catch((err: unknown) => {
    io.out(`error: ${err instanceof CliError ? err.message : errorLine(err)}`);
    io.setExitCode(1);
  });
}

const RECENT_MS = 60 * 60 * 1000;

export function registerPrestartCommands(program: Command, io: PrestartIo = processIo): void {
  const repeat = (value: string, previous: string[] = []) => [...previous, value];
  const common = (c: Command) =>
    c
      .option('-n, --namespace <ns>', "the Revision's namespace (default: the kubeconfig context's, else default)")
      .option('--kubeconfig <path>', 'kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
      .option('--as <user>', 'act as this user (impersonation, as kubectl --as: needs the verb impersonate)')
      .option('--as-group <group>', 'with --as: act as a member of this group (once)', repeat);
  const output = (c: Command) => c.option('-o, --output <format>', 'json or yaml instead of the table', outputFormat);

  common(
    output(
      program
        .command('list')
        .description('held and recent PrestartRuns in the namespace (held first); -A for every namespace')
        .option('-A, --all-namespaces', 'in every namespace')
        .option('--all', 'also runs released more than an hour ago'),
    ),
  ).action((o: Common & Output & { all?: boolean; allNamespaces?: boolean }) =>
    withErrors(io, async () => {
      if (o.allNamespaces && o.namespace !== undefined) throw new InvalidArgumentError('give -n NAMESPACE or -A, not both');
      const { api, namespace } = target(o);
      const list = (
        o.allNamespaces ? await api.listClusterCustomObject(gvp) : await api.listNamespacedCustomObject({ ...gvp, namespace })
      ) as { items: RunObject[] };
      list.items = list.items.map(withStatus);
      const now = io.now();
      const shown = list.items.filter((r) => o.all || r.status?.phase !== 'Released' || now.getTime() - releasedAt(r) < RECENT_MS);
      if (o.output) {
        io.out(printed({ apiVersion: 'v1', kind: 'List', items: shown }, o.output));
        return;
      }
      const where = o.allNamespaces ? '' : ` in ${namespace} (-A: every namespace)`;
      io.out(
        shown.length === 0 ? `No held or recent PrestartRuns${where}.` : renderRunList(shown, now, { allNamespaces: o.allNamespaces }),
      );
    }),
  );

  common(
    output(
      program
        .command('get')
        .description("a Revision's hooks as a tree: phase, progress, deadline, last message, details")
        .argument('<revision>', 'the Revision, e.g. checkout-00002')
        .option('-w, --watch', 'redraw as it changes, until the run is released, failed or cancelled (Ctrl-C to stop)'),
    ),
  ).action((revision: string, o: Common & Output & { watch?: boolean }) =>
    withErrors(io, async () => {
      if (o.watch && o.output) throw new InvalidArgumentError('-w redraws the tree: give it without -o');
      const { api, namespace } = target(o);
      let run = await readRun(api, namespace, revision);
      if (o.output) {
        io.out(printed(run, o.output));
        return;
      }
      if (!o.watch) {
        io.out(renderRunTree(run, io.now()));
        return;
      }
      // A live view: redraw every second (the countdown moves even when the run does not).
      for (;;) {
        io.out(`\x1b[H\x1b[2J${renderRunTree(run, io.now())}`);
        if (run.status?.phase === 'Released' || run.status?.phase === 'Cancelled' || run.status?.phase === 'Failed') return;
        await new Promise((resolve) => setTimeout(resolve, 1000));
        run = await readRun(api, namespace, revision);
      }
    }),
  );

  common(
    program.command('why').description('one paragraph: why a Revision is held, and what to do').argument('<revision>', 'the Revision'),
  ).action((revision: string, o: Common) =>
    withErrors(io, async () => {
      const { api, namespace } = target(o);
      io.out(whyParagraph(await readRun(api, namespace, revision), io.now()));
    }),
  );

  common(
    program
      .command('retry')
      .description("re-run a Revision's failed and timed-out hooks (sets the prestart.dev/retry annotation on its PrestartRun)")
      .argument('<revision>', 'the Revision'),
  ).action((revision: string, o: Common) =>
    withErrors(io, async () => {
      const { api, namespace } = target(o);
      const run = await readRun(api, namespace, revision);
      if (run.status?.phase !== 'Failed') {
        throw new CliError(
          `Revision ${revision} in ${namespace} has no failed hook to retry (its run is ${run.status?.phase ?? 'Pending'}); see: kn prestart why ${revision} -n ${namespace}`,
        );
      }
      await annotateRun(api, namespace, revision, { [RETRY_ANNOTATION]: `cli-${io.now().getTime()}` });
      io.out(`retrying the failed hooks of Revision ${revision} in ${namespace}; watch: kn prestart get ${revision} -n ${namespace} -w`);
    }),
  );

  common(
    program
      .command('plan')
      .description('which hooks a new Revision of a Service would get, in which order, and why each matched')
      .argument('[service]', 'a Knative Service in the cluster (or give -f)')
      .option('-f, --file <path>', 'a Service (or Configuration) manifest, e.g. the one you are about to apply'),
  ).action((name: string | undefined, o: Common & { file?: string }) =>
    withErrors(io, async () => {
      if ((name === undefined) === (o.file === undefined)) throw new CliError('give a Service name or -f FILE (one of them)');
      const { kc, api, namespace } = target(o);
      let service: ServiceLike;
      if (o.file) {
        service = yaml.load(await readFile(o.file, 'utf8')) as ServiceLike;
        if (!service?.spec?.template) throw new CliError(`${o.file} is not a Knative Service or Configuration (no spec.template)`);
      } else {
        service = (await api.getNamespacedCustomObject({
          group: 'serving.knative.dev',
          version: 'v1',
          plural: 'services',
          namespace,
          name: name ?? '',
        })) as ServiceLike;
      }
      const ns = o.namespace ?? service.metadata?.namespace ?? namespace;
      const hooks = (
        (await api.listClusterCustomObject({ group: HOOKS.group, version: HOOKS.version, plural: HOOKS.plural })) as { items: HookObject[] }
      ).items.map(toHook);
      // The namespace's own hooks too: they run after the admin's (docs/design.md §2).
      const teams = (
        (await api.listNamespacedCustomObject({ ...NAMESPACED_HOOKS, namespace: ns })) as { items: NamespacedHookObject[] }
      ).items.map((h) =>
        namespacedHook(
          { namespace: ns, name: h.metadata?.name ?? '', generation: h.metadata?.generation ?? 0, spec: h.spec },
          DEFAULT_CLUSTER_DOMAIN,
        ),
      );
      hooks.push(...teams);
      const labels =
        (
          await kc
            .makeApiClient(CoreV1Api)
            .readNamespace({ name: ns })
            .catch((err: unknown) => {
              if (isNotFound(err)) return undefined;
              throw err;
            })
        )?.metadata?.labels ?? {};
      io.out(renderPlan(service, ns, labels, hooks, await stamper(api)));
    }),
  );

  common(
    program
      .command('release')
      .description(
        'break glass: release a held Revision without its hooks (needs the verb force-release on prestartruns.prestart.dev, cluster-wide); recorded in the run, an Event and the audit log',
      )
      .argument('<revision>', 'the Revision')
      .option('--force', 'required: you mean it')
      .option('--reason <text>', 'required: why (recorded in the run, the Event and the audit log)'),
  ).action((revision: string, o: Common & { force?: boolean; reason?: string }) =>
    withErrors(io, async () => {
      if (!o.force) throw new InvalidArgumentError('release starts the Revision without its hooks: say --force');
      const reason = o.reason?.trim();
      if (!reason) throw new InvalidArgumentError('say why with --reason TEXT: it is recorded in the run, an Event and the audit log');
      const { kc, api, namespace } = target(o);
      const run = await readRun(api, namespace, revision);
      if (run.status?.phase === 'Released') throw new CliError(`Revision ${revision} in ${namespace} is already released`);
      const user = kc.getCurrentUser()?.name ?? '';
      try {
        // The reason is the annotation's value, so the apiserver's audit log records it with the request.
        await annotateRun(api, namespace, revision, {
          [FORCE_RELEASE_ANNOTATION]: reason,
          [FORCE_RELEASE_BY_ANNOTATION]: await whoAmI(kc, user),
        });
      } catch (err) {
        if (statusOf(err) === 403 || statusOf(err) === 422) throw new CliError(`not allowed: ${errorLine(err)}`);
        throw err;
      }
      io.out(
        `asked the gate to release Revision ${revision} in ${namespace} without its hooks (reason: ${reason}); watch: kn prestart get ${revision} -n ${namespace} -w`,
      );
    }),
  );
}

/** The username the apiserver authenticates this kubeconfig as (the policy compares it with the request's). */
async function whoAmI(kc: KubeConfig, fallback: string): Promise<string> {
  try {
    const review = await kc
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({ body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } });
    return review.status?.userInfo?.username ?? fallback;
  } catch {
    return fallback;
  }
}

function releasedAt(run: RunObject): number {
  const t = Date.parse(run.status?.releasedAt ?? '');
  return Number.isNaN(t) ? 0 : t;
}

/** Who stamps the next Revision, as the gate decides it; 'unknown' to a user who may not read the policies. */
async function stamper(api: CustomObjectsApi): Promise<Stamper> {
  const path = await whoStamps(api);
  return path.unknown ? 'unknown' : path.stamper;
}
