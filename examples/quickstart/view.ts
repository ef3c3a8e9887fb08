// What the live view says about the demo namespace: one line per object that tells the story
// (Revision, the events on it, its PrestartRun and hooks, Deployment, pods, Service), derived
// from the objects as last seen. Pure, so the wording and the "done" rule are unit-tested.

import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { type CoreEvent, condition, type KnativeObject } from '@knative-prestart/devcluster/knative-client.ts';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { RunObject } from '../../api/resources.ts';

export interface DemoObjects {
  services: ReadonlyMap<string, KnativeObject>;
  revisions: ReadonlyMap<string, KnativeObject>;
  runs: ReadonlyMap<string, RunObject>;
  deployments: ReadonlyMap<string, V1Deployment>;
  pods: ReadonlyMap<string, V1Pod>;
  /** Events whose involved object is a Revision. */
  events: ReadonlyMap<string, CoreEvent>;
}

/** How a line reads at a glance: waiting, held, fine, failed. */
export type Mark = 'wait' | 'held' | 'ok' | 'fail';

export interface ViewLine {
  /** Stable per object (and hook), so a plain log prints a line only when its text changes. */
  key: string;
  mark: Mark;
  text: string;
  /** How far to indent under the Revision the line belongs to. */
  indent: number;
  /** Whose part the line is about (a hook's PrestartRun), for a log where lines stand alone. */
  context?: string;
}

const REVISION_LABEL = 'serving.knative.dev/revision';
const GATE_COMPONENT = 'knative-prestart-gate';

function hooksOf(rev: KnativeObject): string[] {
  try {
    const hooks: unknown = JSON.parse(rev.metadata?.annotations?.['prestart.dev/hooks'] ?? '[]');
    return Array.isArray(hooks) ? hooks.filter((h): h is string => typeof h === 'string') : [];
  } catch {
    return [];
  }
}

function readiness(obj: KnativeObject | undefined, who: string): string {
  const ready = condition(obj, 'Ready');
  if (!ready) return `${who} has not reported yet`;
  return `${who}: Ready=${ready.status}${ready.reason ? ` (${ready.reason})` : ''}`;
}

function revisionLine(name: string, rev: KnativeObject): ViewLine {
  const hooks = hooksOf(rev);
  const knative = readiness(rev, 'Knative');
  const readyTrue = condition(rev, 'Ready')?.status === 'True';
  if (isHeld(rev)) {
    return {
      key: `revision/${name}`,
      mark: 'held',
      text: `Revision ${name}: held by the gate before Knative may create its Deployment (label prestart.dev/hold=true, hooks: ${hooks.join(', ') || '?'}); ${knative}`,
      indent: 0,
    };
  }
  if (hooks.length > 0) {
    const inject = rev.metadata?.labels?.['prestart.dev/inject'] === 'true' ? ', its pods get the bindings' : '';
    return {
      key: `revision/${name}`,
      mark: readyTrue ? 'ok' : 'wait',
      text: `Revision ${name}: released by the gate (hold label removed${inject}); ${knative}`,
      indent: 0,
    };
  }
  return { key: `revision/${name}`, mark: readyTrue ? 'ok' : 'wait', text: `Revision ${name}: no hook matched it; ${knative}`, indent: 0 };
}

/**
 * Knative's "failed to create deployment" event quotes the whole admission denial; what matters
 * is the hold policy's own words, so they come first, and which create was denied after them.
 */
export function shortEventMessage(message: string): string {
  const denied = /^failed to create deployment "([^"]+)": .*?(knative-prestart: .*)$/s.exec(message);
  return denied ? `${denied[2]} (Knative's create of Deployment ${denied[1]}, denied by the hold policy)` : message;
}

function eventLine(key: string, e: CoreEvent): ViewLine {
  const source = e.source?.component === GATE_COMPONENT ? "the gate's" : "Knative's";
  const count = (e.count ?? 1) > 1 ? ` ×${e.count}` : '';
  return {
    key: `event/${key}`,
    mark: e.type === 'Warning' ? 'held' : 'ok',
    text: `${source} event ${e.type} ${e.reason}${count}: ${shortEventMessage(e.message ?? '')}`,
    indent: 1,
    context: `Revision ${e.involvedObject?.name}`,
  };
}

function runLines(name: string, run: RunObject): ViewLine[] {
  const status = run.status;
  const phase = status?.phase ?? 'Pending';
  const mark: Mark = phase === 'Released' ? 'ok' : phase === 'Failed' || phase === 'Cancelled' ? 'fail' : 'wait';
  const lines: ViewLine[] = [
    {
      key: `run/${name}`,
      mark,
      text: `PrestartRun ${name}: ${phase}${status?.summary ? ` (${status.summary} hooks succeeded)` : ''}`,
      indent: 1,
    },
  ];
  for (const hook of status?.hooks ?? []) {
    const hookMark: Mark = hook.phase === 'Succeeded' ? 'ok' : ['Failed', 'TimedOut', 'Cancelled'].includes(hook.phase) ? 'fail' : 'wait';
    const progress = hook.phase === 'Succeeded' ? 100 : hook.progress;
    lines.push({
      key: `run/${name}/hook/${hook.name}`,
      mark: hookMark,
      text:
        `hook ${hook.name}: ${hook.phase}${progress !== undefined ? ` ${progress}%` : ''}` +
        `${hook.attempt > 1 ? ` (attempt ${hook.attempt})` : ''}${hook.message ? `: ${hook.message}` : ''}`,
      indent: 2,
      context: `PrestartRun ${name}`,
    });
  }
  return lines;
}

function deploymentLine(d: V1Deployment): ViewLine {
  const ready = d.status?.readyReplicas ?? 0;
  const wanted = d.spec?.replicas ?? 1;
  return {
    key: `deployment/${d.metadata?.name}`,
    mark: ready >= wanted && wanted > 0 ? 'ok' : 'wait',
    text: `Deployment ${d.metadata?.name}: created by Knative, ${ready}/${wanted} pods ready`,
    indent: 1,
  };
}

export interface PodBinding {
  env: { name: string; secret: string; key: string }[];
  mounts: { path: string; secret: string }[];
}

/** What the gate's pod webhook projected into the app container (never into queue-proxy). */
export function podBinding(pod: V1Pod): PodBinding {
  const secretVolumes = new Map<string, string>();
  for (const v of pod.spec?.volumes ?? []) if (v.secret?.secretName) secretVolumes.set(v.name, v.secret.secretName);
  const binding: PodBinding = { env: [], mounts: [] };
  for (const c of pod.spec?.containers ?? []) {
    if (c.name === 'queue-proxy') continue;
    for (const e of c.env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (ref?.name) binding.env.push({ name: e.name, secret: ref.name, key: ref.key });
    }
    for (const m of c.volumeMounts ?? []) {
      const secret = secretVolumes.get(m.name);
      if (secret) binding.mounts.push({ path: m.mountPath, secret });
    }
  }
  return binding;
}

export function describeBinding(b: PodBinding): string {
  const parts: string[] = [];
  const bySecret = new Map<string, string[]>();
  for (const e of b.env) bySecret.set(e.secret, [...(bySecret.get(e.secret) ?? []), e.name]);
  for (const [secret, names] of bySecret) parts.push(`env ${names.join(', ')} from Secret ${secret}`);
  for (const m of b.mounts) parts.push(`files at ${m.path} from Secret ${m.secret}`);
  return parts.length > 0 ? `binding: ${parts.join('; ')}` : 'no binding';
}

export function podReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

function podLine(pod: V1Pod): ViewLine {
  const ready = podReady(pod);
  return {
    key: `pod/${pod.metadata?.name}`,
    mark: ready ? 'ok' : 'wait',
    text: `Pod ${pod.metadata?.name}: ${pod.status?.phase ?? 'Pending'}, ${ready ? 'Ready' : 'not ready'}; ${describeBinding(podBinding(pod))}`,
    indent: 1,
  };
}

function serviceLine(name: string, svc: KnativeObject): ViewLine {
  const ready = condition(svc, 'Ready');
  if (ready?.status === 'True') {
    const traffic = (svc.status?.traffic ?? []).map((t) => `${t.percent ?? 0}% to ${t.revisionName}`).join(', ');
    return {
      key: `service/${name}`,
      mark: 'ok',
      text: `Service ${name}: Ready, traffic ${traffic || 'none'} (its Route reads Ready from the Ingress stand-in)`,
      indent: 0,
    };
  }
  const why = ready
    ? `Ready=${ready.status}${ready.reason ? ` (${ready.reason})` : ''}${ready.message ? `: ${ready.message}` : ''}`
    : 'no status yet';
  return {
    key: `service/${name}`,
    mark: ready?.status === 'False' ? 'fail' : 'wait',
    text: `Service ${name}: not ready yet, ${why}`,
    indent: 0,
  };
}

const byName = <T extends { metadata?: { name?: string } }>(a: T, b: T) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? '');

/** The view, Revision by Revision in creation order, then the Services. */
export function viewLines(objs: DemoObjects): ViewLine[] {
  const lines: ViewLine[] = [];
  const revisions = [...objs.revisions.entries()].sort(([a], [b]) => a.localeCompare(b));
  for (const [name, rev] of revisions) {
    lines.push(revisionLine(name, rev));
    const events = [...objs.events.entries()]
      .filter(([, e]) => e.involvedObject?.name === name)
      .sort(([, a], [, b]) => eventTime(a).localeCompare(eventTime(b)));
    for (const [key, e] of events) lines.push(eventLine(key, e));
    const run = objs.runs.get(name);
    if (run) lines.push(...runLines(name, run));
    const ofRevision = <T extends { metadata?: { labels?: Record<string, string> } }>(o: T) =>
      o.metadata?.labels?.[REVISION_LABEL] === name;
    for (const d of [...objs.deployments.values()].filter(ofRevision).sort(byName)) lines.push(deploymentLine(d));
    for (const p of [...objs.pods.values()].filter(ofRevision).sort(byName)) lines.push(podLine(p));
  }
  for (const [name, svc] of [...objs.services.entries()].sort(([a], [b]) => a.localeCompare(b))) lines.push(serviceLine(name, svc));
  return lines;
}

function eventTime(e: CoreEvent & { firstTimestamp?: unknown; eventTime?: unknown }): string {
  const t = e.firstTimestamp ?? e.eventTime;
  return t instanceof Date ? t.toISOString() : typeof t === 'string' ? t : '';
}
