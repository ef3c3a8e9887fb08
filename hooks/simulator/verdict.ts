// What the gate would make of the replies: each one goes through applyReply, then decide() says
// whether the Revision is released, and podPatch() shows what its pods would get injected.

import type { Contribution, HookPhase, PrestartRunView, Reply, RunPhase } from '../../api/types.ts';
import { applyReply, decide, type JsonPatchOp, type PodView, podPatch } from '../../gate/core/index.ts';
import type { Scenario } from './scenario.ts';

export const BINDING_ROOT = '/bindings';

/** A Knative Revision's pod as the Pod webhook sees it: the user's container and queue-proxy. */
export const SAMPLE_POD: PodView = {
  spec: {
    containers: [{ name: 'user-container', env: [{ name: 'PORT', value: '8080' }] }, { name: 'queue-proxy' }],
  },
};

export interface Verdict {
  released: boolean;
  runPhase: RunPhase;
  hookPhase: HookPhase;
  /** One line: why released or held. */
  why: string;
  /** What each reply did to the run ("progress 40%: ...", "duplicate", "rejected: ..."). */
  steps: string[];
  /** Contributions the gate kept. */
  contributions: Contribution[];
  /** Readable lines for the contributions: env vars and mounts. */
  injected: string[];
  /** The Pod webhook's JSON patch on SAMPLE_POD. */
  patch: JsonPatchOp[];
}

/** `waiting`: why no final reply is there, when there is none (no reply, or one the gate refuses). */
export function judge(scenario: Scenario, replies: readonly Reply[], now: Date, waiting?: string): Verdict {
  let run: PrestartRunView = scenario.run;
  const hookName = scenario.send.hook.name;
  const steps: string[] = [];
  for (const reply of replies) {
    const result = applyReply(run, reply, now);
    if (result.type === 'applied' || result.type === 'progress') {
      run = { ...run, status: result.status };
      const status = result.status.hooks.find((h) => h.name === hookName);
      const pct = status?.progress === undefined ? '' : ` ${status.progress}%`;
      // A retry's reason is its own (retryReason); the hook's last message is unchanged by it.
      const said = reply.outcome === 'retry' && status?.retryAt ? `retry at ${status.retryAt}: ${status.retryReason}` : undefined;
      steps.push(said ?? `${reply.outcome}${pct}${status?.message ? `: ${status.message}` : ''}`);
    } else if (result.type === 'duplicate') steps.push(`${reply.outcome}: a duplicate, nothing changes`);
    else steps.push(`${reply.outcome}: refused (${result.reason})`);
  }
  const decision = decide({ ...scenario.observed, run, now });
  for (const action of decision.actions) {
    if (action.type === 'updateRunStatus') run = { ...run, status: action.status };
  }
  const status = run.status;
  const hook = status?.hooks.find((h) => h.name === hookName);
  const released = decision.actions.some((a) => a.type === 'release');
  const holdReason = decision.actions.find((a) => a.type === 'setHoldReason');
  const ready = status?.conditions.find((c) => c.type === 'Ready');
  const contributions = released ? (hook?.contributions ?? []) : [];
  let why: string;
  if (released) why = `released: ${ready?.message ?? 'all hooks passed'}`;
  else if (holdReason?.type === 'setHoldReason' && holdReason.reason) why = `held: ${holdReason.reason}`;
  else {
    const wait = waiting ?? 'no final reply yet';
    why = `held: ${wait}; the gate re-sends the request every ${scenario.send.hook.resendIntervalSeconds}s until the deadline ${scenario.send.deadline}, then the hook is TimedOut`;
  }
  return {
    released,
    runPhase: status?.phase ?? 'Pending',
    hookPhase: hook?.phase ?? 'Pending',
    why,
    steps,
    contributions,
    injected: describeContributions(contributions),
    patch: contributions.length > 0 ? podPatch(SAMPLE_POD, contributions, BINDING_ROOT) : [],
  };
}

export function describeContributions(contributions: readonly Contribution[]): string[] {
  return contributions.flatMap((c) => {
    switch (c.as) {
      case 'env':
        return Object.entries(c.env ?? {}).map(([name, key]) => `env ${name} = key "${key}" of Secret ${c.secretName}`);
      case 'envFrom':
        return [`envFrom: every key of Secret ${c.secretName} as an env var`];
      case 'volume':
        return [`volume: Secret ${c.secretName} mounted read-only at ${BINDING_ROOT}/${c.name} (SERVICE_BINDING_ROOT=${BINDING_ROOT})`];
    }
    return [];
  });
}
