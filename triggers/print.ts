// The Triggers the gate would create, as YAML for people who keep their manifests in Git
// (`knative-prestart triggers`). Same objects as the reconciler's, from the same function.
import yaml from 'js-yaml';
import type { PrestartHookSpec } from '../api/types.ts';
import { API_VERSION } from '../api/types.ts';
import type { OwnedHook, TriggerObject } from './desired.ts';

export class HookFileError extends Error {
  override readonly name = 'HookFileError';
}

interface HookDoc {
  apiVersion?: unknown;
  kind?: unknown;
  metadata?: { name?: unknown; uid?: unknown; generation?: unknown };
  spec?: PrestartHookSpec;
  items?: unknown[];
}

/**
 * The PrestartHooks among the documents of a (multi-document) YAML text; other kinds are
 * skipped, `List`s are opened. A hook with transport broker must name its Broker and subscriber,
 * as the CRD would insist.
 */
export function hooksFromYaml(text: string, source = 'input'): OwnedHook[] {
  const hooks: OwnedHook[] = [];
  const add = (doc: unknown, where: string) => {
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return;
    const d = doc as HookDoc;
    if (typeof d.kind === 'string' && d.kind.endsWith('List') && Array.isArray(d.items)) {
      for (const [i, item] of d.items.entries()) add(item, `${where} item ${i + 1}`);
      return;
    }
    if (d.kind !== 'PrestartHook' || d.apiVersion !== API_VERSION) return;
    const name = d.metadata?.name;
    if (typeof name !== 'string' || name === '') throw new HookFileError(`${where}: a PrestartHook without metadata.name`);
    const delivery = d.spec?.delivery;
    if (!d.spec || !delivery) throw new HookFileError(`${where}: PrestartHook ${name} has no spec.delivery`);
    // The CRD defaults the transport to http.
    const spec: PrestartHookSpec = { ...d.spec, delivery: { ...delivery, transport: delivery.transport ?? 'http' } };
    if (spec.delivery.transport === 'broker') {
      const b = spec.delivery.broker;
      if (!b || typeof b.name !== 'string' || typeof b.namespace !== 'string' || !b.subscriber || !(b.subscriber.ref || b.subscriber.uri)) {
        throw new HookFileError(
          `${where}: PrestartHook ${name} has transport broker but no delivery.broker.{name, namespace, subscriber.ref|uri}`,
        );
      }
    }
    hooks.push({
      name,
      generation: typeof d.metadata?.generation === 'number' ? d.metadata.generation : 0,
      spec,
      ...(typeof d.metadata?.uid === 'string' ? { uid: d.metadata.uid } : {}),
    });
  };
  let docs: unknown[];
  try {
    docs = yaml.loadAll(text);
  } catch (err) {
    throw new HookFileError(`${source}: not YAML: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
  for (const [i, doc] of docs.entries()) add(doc, `${source} document ${i + 1}`);
  return hooks;
}

export interface PrintOptions {
  /**
   * Keep the ownerReferences to the hooks. Off by default: they name the hooks' uids in one
   * cluster, which a manifest kept in Git should not (recreated hooks get new uids, and the
   * garbage collector deletes objects whose owners are gone).
   */
  ownerReferences?: boolean;
}

/** Multi-document YAML, one Trigger per document, in the given order; empty text when there are none. */
export function printTriggers(triggers: readonly TriggerObject[], opts: PrintOptions = {}): string {
  return triggers
    .map((t) => {
      const { ownerReferences, ...metadata } = t.metadata;
      const doc = opts.ownerReferences && ownerReferences ? t : { ...t, metadata };
      return `---\n${yaml.dump(doc, { noRefs: true, lineWidth: -1, quotingType: '"' })}`;
    })
    .join('');
}
