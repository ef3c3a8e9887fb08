// The demo namespace as it changes: one watch per kind the live view shows, each keeping the
// objects as last seen, and a callback after every change so no short-lived state is missed.
import { type KubeConfig, Watch } from '@kubernetes/client-node';
import type { DemoObjects } from './view.ts';

export interface DemoWatch {
  objects: DemoObjects;
  stop(): void;
}

type Named = { metadata?: { name?: string } };

export async function watchDemo(kc: KubeConfig, namespace: string, onChange: () => void): Promise<DemoWatch> {
  const objects = {
    services: new Map(),
    revisions: new Map(),
    runs: new Map(),
    deployments: new Map(),
    pods: new Map(),
    events: new Map(),
  } satisfies DemoObjects;
  const sources: [Map<string, Named>, string, Record<string, string>][] = [
    [objects.services, `/apis/serving.knative.dev/v1/namespaces/${namespace}/services`, {}],
    [objects.revisions, `/apis/serving.knative.dev/v1/namespaces/${namespace}/revisions`, {}],
    [objects.runs, `/apis/prestart.dev/v1alpha1/namespaces/${namespace}/prestartruns`, {}],
    [objects.deployments, `/apis/apps/v1/namespaces/${namespace}/deployments`, {}],
    [objects.pods, `/api/v1/namespaces/${namespace}/pods`, {}],
    [objects.events, `/api/v1/namespaces/${namespace}/events`, { fieldSelector: 'involvedObject.kind=Revision' }],
  ];
  let stopped = false;
  const controllers = new Set<AbortController>();
  const watch = new Watch(kc);

  const follow = async (into: Map<string, Named>, path: string, query: Record<string, string>): Promise<void> => {
    let controller: AbortController | undefined;
    const resume = (err: unknown) => {
      if (controller) controllers.delete(controller);
      if (stopped) return;
      // The apiserver ends watches now and then; after an error, pause so a dead apiserver is not hammered.
      setTimeout(() => void follow(into, path, query).catch(() => resume(true)), err ? 1000 : 0).unref();
    };
    controller = await watch.watch(
      path,
      query,
      (phase: string, obj: Named) => {
        const name = obj?.metadata?.name;
        if (stopped || !name) return;
        if (phase === 'DELETED') into.delete(name);
        else if (phase === 'ADDED' || phase === 'MODIFIED') into.set(name, obj);
        else return;
        onChange();
      },
      resume,
    );
    controllers.add(controller);
  };
  await Promise.all(sources.map(([into, path, query]) => follow(into, path, query)));
  return {
    objects,
    stop() {
      stopped = true;
      for (const c of controllers) c.abort();
    },
  };
}
