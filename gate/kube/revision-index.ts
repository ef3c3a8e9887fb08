// Revisions by Configuration, kept up to date from the informer of every Revision's stub
// (gate/kube/cache-views.ts revisionStub). Supersession ("a newer Revision of the same
// Configuration exists") and "which held Revisions might a new one supersede" are then a look at
// one Configuration's Revisions instead of a scan of the namespace on every reconcile, which made
// a leader's resync quadratic in the Revisions per namespace.
import type { KubernetesObject } from '@kubernetes/client-node';
import { configurationGeneration, keyOf } from '../../api/resources.ts';
import { CANCEL_FINALIZER } from '../../api/types.ts';
import { CONFIGURATION_LABEL } from './cache-views.ts';

export interface Sibling {
  name: string;
  generation: number;
}

export class RevisionIndex {
  /** "namespace/configuration" -> Revision name -> configurationGeneration. */
  private readonly byConfiguration = new Map<string, Map<string, number>>();
  /** "namespace/name" -> its "namespace/configuration", to move or drop it on update and delete. */
  private readonly configurationOf = new Map<string, string>();
  /** One instance of each "namespace/configuration" string. */
  private readonly groupNames = new Map<string, string>();
  /** Keys of Revisions that carry the gate's cancel finalizer. */
  private readonly finalized = new Set<string>();

  /** An add or an update from the informer. */
  set(obj: KubernetesObject): void {
    const key = keyOf(obj);
    this.unlink(key);
    const configuration = obj.metadata?.labels?.[CONFIGURATION_LABEL];
    if (configuration) {
      const name = `${obj.metadata?.namespace ?? ''}/${configuration}`;
      const group = this.groupNames.get(name) ?? name;
      this.groupNames.set(group, group);
      let members = this.byConfiguration.get(group);
      if (!members) {
        members = new Map();
        this.byConfiguration.set(group, members);
      }
      members.set(obj.metadata?.name ?? '', configurationGeneration(obj));
      this.configurationOf.set(key, group);
    }
    if (obj.metadata?.finalizers?.includes(CANCEL_FINALIZER)) this.finalized.add(key);
    else this.finalized.delete(key);
  }

  delete(obj: KubernetesObject): void {
    const key = keyOf(obj);
    this.unlink(key);
    this.finalized.delete(key);
  }

  /** The newest Revision of the Configuration with a generation above `generation`, if any. */
  newer(namespace: string, configuration: string, generation: number): Sibling | undefined {
    let newest: Sibling | undefined;
    for (const [name, gen] of this.byConfiguration.get(`${namespace}/${configuration}`) ?? []) {
      if (gen > generation && (!newest || gen > newest.generation)) newest = { name, generation: gen };
    }
    return newest;
  }

  /** Names of the Configuration's Revisions. */
  siblings(namespace: string, configuration: string): Iterable<string> {
    return this.byConfiguration.get(`${namespace}/${configuration}`)?.keys() ?? [];
  }

  /** "namespace/name" of every Revision that carries the gate's cancel finalizer. */
  withFinalizer(): Iterable<string> {
    return this.finalized;
  }

  hasFinalizer(namespace: string, name: string): boolean {
    return this.finalized.has(`${namespace}/${name}`);
  }

  private unlink(key: string): void {
    const group = this.configurationOf.get(key);
    if (group === undefined) return;
    this.configurationOf.delete(key);
    const members = this.byConfiguration.get(group);
    members?.delete(key.slice(key.indexOf('/') + 1));
    if (members?.size === 0) {
      this.byConfiguration.delete(group);
      this.groupNames.delete(group);
    }
  }
}
