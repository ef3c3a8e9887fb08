// The demo's milestones: when each step of the story was first seen (held, released, Deployment,
// a pod Ready with the binding, the Service Ready), the rule for "done", and what a timeout names.

import { isHeld } from '@knative-prestart/devcluster/gate/revisions.ts';
import { condition } from '@knative-prestart/devcluster/knative-client.ts';
import type { V1Pod } from '@kubernetes/client-node';
import { type DemoObjects, podBinding, podReady } from './view.ts';

const REVISION_LABEL = 'serving.knative.dev/revision';

export interface Milestones {
  held?: number;
  released?: number;
  deployment?: number;
  podReady?: number;
  serviceReady?: number;
  /** Why the demo cannot complete (a hook failed), in one line. */
  failed?: string;
}

export interface DemoTarget {
  service: string;
  revision: string;
  namespace: string;
}

/**
 * Milestones after one more observation. Called after every watch event, so a state that lasts
 * a moment (the hold) is not missed. Release counts only after the hold was seen: a Revision that
 * was never held means the gate did not do its job, and the demo must not report success.
 */
export function nextMilestones(m: Milestones, objs: DemoObjects, target: DemoTarget, now: number): Milestones {
  const next = { ...m };
  const rev = objs.revisions.get(target.revision);
  if (next.held === undefined && rev && isHeld(rev)) next.held = now;
  if (next.held !== undefined && next.released === undefined && rev && !isHeld(rev)) next.released = now;
  const ofRevision = <T extends { metadata?: { labels?: Record<string, string> } }>(o: T) =>
    o.metadata?.labels?.[REVISION_LABEL] === target.revision;
  if (next.released !== undefined && next.deployment === undefined && [...objs.deployments.values()].some(ofRevision)) {
    next.deployment = now;
  }
  const boundAndReady = (p: V1Pod) => {
    const b = podBinding(p);
    return podReady(p) && b.env.length > 0 && b.mounts.length > 0;
  };
  if (next.deployment !== undefined && next.podReady === undefined && [...objs.pods.values()].filter(ofRevision).some(boundAndReady)) {
    next.podReady = now;
  }
  const svc = objs.services.get(target.service);
  if (
    next.podReady !== undefined &&
    next.serviceReady === undefined &&
    condition(svc, 'Ready')?.status === 'True' &&
    svc?.status?.latestReadyRevisionName === target.revision
  ) {
    next.serviceReady = now;
  }
  if (next.failed === undefined && next.released === undefined) {
    const run = objs.runs.get(target.revision);
    const failedHook = run?.status?.hooks?.find((h) => ['Failed', 'TimedOut', 'Cancelled'].includes(h.phase));
    if (failedHook) {
      next.failed =
        `hook ${failedHook.name} ${failedHook.phase.toLowerCase()}${failedHook.message ? `: ${failedHook.message}` : ''}; ` +
        `Revision ${target.revision} stays held (kubectl get prestartrun ${target.revision} -n ${target.namespace})`;
    }
  }
  return next;
}

export function demoDone(m: Milestones): boolean {
  return m.serviceReady !== undefined;
}

/** What the demo waits for next, for a timeout message. */
export function waitingFor(m: Milestones, target: DemoTarget): string {
  if (m.held === undefined) return `Knative to create Revision ${target.revision} and the gate to hold it`;
  if (m.released === undefined) return `the hook to finish and the gate to release Revision ${target.revision}`;
  if (m.deployment === undefined) return `Knative to create the Deployment of Revision ${target.revision}`;
  if (m.podReady === undefined) return `a pod of Revision ${target.revision} Ready with the binding`;
  return `Service ${target.service} Ready with its traffic on ${target.revision}`;
}

/** "held +0.4s, released +8.9s (held for 8.5s), ..." relative to the Service's creation. */
export function timeline(m: Milestones, serviceCreatedAt: number): string {
  const at = (t: number | undefined) => (t === undefined ? 'not seen' : `+${((t - serviceCreatedAt) / 1000).toFixed(1)}s`);
  const heldFor = m.held !== undefined && m.released !== undefined ? ` (held for ${((m.released - m.held) / 1000).toFixed(1)}s)` : '';
  return [
    `held ${at(m.held)}`,
    `released ${at(m.released)}${heldFor}`,
    `Deployment ${at(m.deployment)}`,
    `pod Ready with the binding ${at(m.podReady)}`,
    `Service Ready ${at(m.serviceReady)}`,
  ].join(', ');
}
