// What `kn prestart list/get/why` print, from PrestartRuns as read. Pure (objects and a time in,
// text out), so the wording, the tree and the countdowns are unit-tested; the commands only read
// and redraw.
import type { RunObject } from '../../api/resources.ts';
import type { HookSnapshot, HookStatus, PrestartRunStatus } from '../../api/types.ts';
import { RETRY_ANNOTATION } from '../../api/types.ts';
import { driftText } from '../../gate/core/drift.ts';
import { namespaceOfHook, runOrder } from '../../gate/core/namespaced-hooks.ts';
import { isWaitingToRetry, retryLimitsOf } from '../../gate/core/retry-after.ts';

const MARK: Record<string, string> = {
  Pending: '○',
  Requested: '◌',
  Succeeded: '✔',
  Failed: '✖',
  TimedOut: '✖',
  Cancelled: '⊘',
  Running: '◌',
  Released: '✔',
};

/** "4m12s", "1h3m", "9s"; negative durations read "0s". */
export function humanDuration(ms: number): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m}m`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/** "[####------]  40%" (10 cells). */
export function progressBar(percent: number | undefined): string {
  if (percent === undefined) return '';
  const p = Math.max(0, Math.min(100, Math.round(percent)));
  const full = Math.round(p / 10);
  return `[${'#'.repeat(full)}${'-'.repeat(10 - full)}] ${String(p).padStart(3)}%`;
}

function deadlineText(h: HookStatus, now: Date): string {
  if (h.phase !== 'Requested' || !h.deadline) return '';
  const left = Date.parse(h.deadline) - now.getTime();
  return Number.isNaN(left) ? '' : left > 0 ? `deadline in ${humanDuration(left)}` : 'deadline passed';
}

/**
 * "retrying in 40s: quota busy (attempt 3, retry 2 of 10)" for a hook that asked to be asked
 * again; "after 2 retries" for one asked again since; '' otherwise.
 */
export function retryText(h: HookStatus, snapshot: HookSnapshot | undefined, now: Date): string {
  if (!isWaitingToRetry(h)) {
    return h.retries && (h.phase === 'Requested' || h.phase === 'Succeeded')
      ? `after ${h.retries} ${h.retries === 1 ? 'retry' : 'retries'}`
      : '';
  }
  const left = Date.parse(h.retryAt ?? '') - now.getTime();
  const when = Number.isNaN(left) || left <= 0 ? 'retrying now' : `retrying in ${humanDuration(left)}`;
  const limit = snapshot ? ` of ${retryLimitsOf(snapshot).maxRetries}` : '';
  return `${when}: ${h.retryReason ?? 'not ready yet'} (attempt ${h.attempt + 1}, retry ${h.retries ?? 1}${limit})`;
}

interface Row {
  hook: HookStatus;
  snapshot: HookSnapshot | undefined;
}

function rowsOf(run: RunObject): Row[] {
  const snapshots = new Map((run.spec?.hooks ?? []).map((s) => [s.name, s]));
  const hooks = run.status?.hooks ?? run.spec?.hooks.map((s): HookStatus => ({ name: s.name, phase: 'Pending', attempt: 1 })) ?? [];
  return hooks.map((hook) => ({ hook, snapshot: snapshots.get(hook.name) })).sort((a, b) => stageOf(a) - stageOf(b));
}

/** The stage a row runs in: a namespace's own hooks after every admin hook (runOrder). */
function stageOf(r: Row): number {
  return r.snapshot ? runOrder(r.snapshot) : -1;
}

function stageTitle(r: Row | undefined): string {
  if (!r?.snapshot) return 'order ?';
  const ns = namespaceOfHook(r.snapshot.name);
  return ns === undefined ? `order ${r.snapshot.order}` : `${ns}'s own hooks, order ${r.snapshot.order} (after every PrestartHook)`;
}

/** The live tree of `kn prestart get`: the run, then its hooks grouped by order. */
export function renderRunTree(run: RunObject, now: Date): string {
  const md = run.metadata ?? {};
  const status: PrestartRunStatus | undefined = run.status;
  const phase = status?.phase ?? 'Pending';
  const ready = status?.conditions.find((c) => c.type === 'Ready');
  const lines = [
    `Name:       ${md.name ?? ''}`,
    `Namespace:  ${md.namespace ?? ''}`,
    `Status:     ${MARK[phase] ?? '?'} ${phase}${status?.summary ? ` (${status.summary} hooks succeeded)` : ''}`,
  ];
  if (ready?.message) lines.push(`Message:    ${ready.message}`);
  // What the hooks were asked about, and what the Revision is released with.
  for (const [i, c] of (run.spec?.containers ?? []).entries()) {
    const what = c.digest ?? `${c.image} (as written: Knative does not resolve its registry)`;
    const label = (i === 0 ? 'Images:' : '').padEnd(12);
    lines.push(`${label}${c.init ? 'init ' : ''}${c.name}  ${what}`);
  }
  lines.push('', `${md.name ?? ''} (PrestartRun)`);
  const rows = rowsOf(run);
  const stages = [...new Set(rows.map(stageOf))];
  stages.forEach((stage, oi) => {
    const lastOrder = oi === stages.length - 1;
    const inOrder = rows.filter((r) => stageOf(r) === stage);
    lines.push(`${lastOrder ? '└──' : '├──'} ${stageTitle(inOrder[0])}`);
    inOrder.forEach((r, hi) => {
      const stem = lastOrder ? '    ' : '│   ';
      const last = hi === inOrder.length - 1;
      const h = r.hook;
      const mode = r.snapshot?.mode === 'Audit' ? ' (audit)' : '';
      const cols = [
        `${MARK[h.phase] ?? '?'} ${h.name}${mode}`,
        h.phase,
        `attempt ${h.attempt}`,
        progressBar(h.progress),
        retryText(h, r.snapshot, now),
        deadlineText(h, now),
      ].filter((c) => c !== '');
      lines.push(`${stem}${last ? '└──' : '├──'} ${cols.join('  ')}`);
      const under = `${stem}${last ? '    ' : '│   '}    `;
      if (h.message) lines.push(`${under}${h.message}`);
      if (h.details) lines.push(`${under}details: ${h.details}`);
    });
  });
  return lines.join('\n');
}

/** One paragraph a person can act on: what holds the Revision, since when, and the next step. */
export function whyParagraph(run: RunObject, now: Date): string {
  const ns = run.metadata?.namespace ?? '';
  const name = run.metadata?.name ?? '';
  const rev = `Revision ${name} in ${ns}`;
  const status = run.status;
  const rows = rowsOf(run);
  const done = rows.filter((r) => r.hook.phase === 'Succeeded').map((r) => r.hook.name);
  const doneText = done.length > 0 ? ` Already succeeded: ${done.join(', ')}.` : '';
  const detailsOf = (rs: Row[]) =>
    rs
      .filter((r) => r.hook.details)
      .map((r) => ` Details for ${r.hook.name}: ${r.hook.details}.`)
      .join('');
  switch (status?.phase ?? 'Pending') {
    case 'Released':
      return `${rev} is not held: it was released${status?.releasedAt ? ` at ${status.releasedAt}` : ''} (${readyMessage(status) ?? 'all hooks passed'}).${saidSentences(rows)}${driftSentences(status)}`;
    case 'Cancelled':
      return `${rev} will not start: its hooks were ${readyMessage(status) ?? 'cancelled'}. A cancelled run is final; to start over, delete it: kubectl delete prestartrun ${name} -n ${ns}.`;
    case 'Failed': {
      const blocking = rows.filter((r) => r.hook.phase === 'Failed' || r.hook.phase === 'TimedOut' || r.hook.phase === 'Cancelled');
      const what = blocking.map(
        (r) => `hook ${r.hook.name} ${failureVerb(r.hook)}${r.hook.message ? `: ${r.hook.message}` : ''} (attempt ${r.hook.attempt})`,
      );
      const retryable = blocking.every((r) => r.snapshot !== undefined);
      const next = retryable
        ? `Fix the cause, then re-run the failed hooks with: kn prestart retry ${name} -n ${ns} (or: kubectl annotate prestartrun ${name} -n ${ns} ${RETRY_ANNOTATION}=<new value> --overwrite).`
        : `A hook was missing or invalid when the run started, so it cannot be retried: fix the PrestartHook, then start over with: kubectl delete prestartrun ${name} -n ${ns}.`;
      return `${rev} is held because ${what.join('; ')}.${doneText}${detailsOf(blocking)} ${next}`;
    }
    default: {
      const waiting = rows.filter((r) => r.hook.phase === 'Requested');
      if (waiting.length === 0)
        return `${rev} is held: the gate has not requested its hooks yet (${rows.map((r) => r.hook.name).join(', ')}). If this lasts, check that the gate is running.`;
      const what = waiting.map((r) => {
        const parts = [`order ${r.snapshot?.order ?? '?'}`, `attempt ${r.hook.attempt}`];
        if (r.hook.progress !== undefined) parts.push(`${r.hook.progress}%`);
        const retry = retryText(r.hook, r.snapshot, now);
        if (retry) parts.push(retry);
        const deadline = deadlineText(r.hook, now);
        if (deadline) parts.push(deadline.replace('deadline ', 'times out '));
        return `hook ${r.hook.name} (${parts.join(', ')})${r.hook.message ? `, which last said "${r.hook.message}"` : ''}`;
      });
      return `${rev} is held while it waits for ${what.join(' and ')}.${doneText}${detailsOf(waiting)} Nothing to do unless it is stuck: watch it with kn prestart get ${name} -n ${ns} -w.`;
    }
  }
}

/** What each hook said when it let the Revision go (an approval hook: who approved, when and why). */
function saidSentences(rows: readonly Row[]): string {
  return rows
    .filter((r) => r.hook.phase === 'Succeeded' && r.hook.message)
    .map((r) => ` ${r.hook.name} said: ${r.hook.message}.`)
    .join('');
}

/** What the gate saw running after the release that the hooks did not approve (status.imageDrift). */
function driftSentences(status: PrestartRunStatus | undefined): string {
  const drift = status?.imageDrift ?? [];
  if (drift.length === 0) return '';
  const lines = drift.map((d) => ` Image drift: ${driftText(d)} (seen ${d.detectedAt}).`);
  return `${lines.join('')} Find who changed it in the audit log; the Revision's Warning ImageDrift events say the same.`;
}

function failureVerb(h: HookStatus): string {
  return h.phase === 'TimedOut' ? 'timed out' : h.phase === 'Cancelled' ? 'was cancelled' : 'failed';
}

function readyMessage(status: PrestartRunStatus | undefined): string | undefined {
  return status?.conditions.find((c) => c.type === 'Ready')?.message;
}

/**
 * `kn prestart list`: in one namespace, held runs first, then the most recent; with -A
 * (`allNamespaces`), by namespace, then name, as kubectl sorts, so a namespace's runs stay
 * together and a line is found where one looks for it. One line each.
 */
export function renderRunList(runs: readonly RunObject[], now: Date, opts: { allNamespaces?: boolean } = {}): string {
  const rows = [...runs].sort(opts.allNamespaces ? byNamespaceThenName : (a, b) => held(a) - held(b) || created(b) - created(a));
  const table = [['NAMESPACE', 'REVISION', 'PHASE', 'HOOKS', 'AGE', 'WAITING ON / REASON']];
  for (const run of rows) {
    const status = run.status;
    const snapshots = new Map((run.spec?.hooks ?? []).map((s) => [s.name, s]));
    const current = (status?.hooks ?? []).filter((h) => h.phase === 'Requested' || h.phase === 'Failed' || h.phase === 'TimedOut');
    const note = current
      .map((h) =>
        isWaitingToRetry(h)
          ? `${h.name} ${retryText(h, snapshots.get(h.name), now)}`
          : `${h.name} ${h.phase}${h.progress !== undefined ? ` ${h.progress}%` : ''}${h.message ? `: ${h.message}` : ''}`,
      )
      .join('; ');
    table.push([
      run.metadata?.namespace ?? '',
      run.metadata?.name ?? '',
      status?.phase ?? 'Pending',
      status?.summary ?? '',
      humanDuration(now.getTime() - created(run)),
      note.length > 80 ? `${note.slice(0, 79)}…` : note,
    ]);
  }
  const widths = table[0]?.map((_, i) => Math.max(...table.map((r) => (r[i] ?? '').length))) ?? [];
  return table
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** 0 for a run that still holds its Revision, 1 once released: held ones sort first. */
function held(run: RunObject): number {
  return run.status?.phase !== 'Released' ? 0 : 1;
}

/** kubectl's order for a list across namespaces (the apiserver's key order): namespace, then name. */
function byNamespaceThenName(a: RunObject, b: RunObject): number {
  const key = (r: RunObject): [string, string] => [r.metadata?.namespace ?? '', r.metadata?.name ?? ''];
  const [na, ma] = key(a);
  const [nb, mb] = key(b);
  if (na !== nb) return na < nb ? -1 : 1;
  return ma < mb ? -1 : ma > mb ? 1 : 0;
}

function created(run: RunObject): number {
  const t = run.metadata?.creationTimestamp;
  return t ? new Date(t).getTime() : 0;
}
