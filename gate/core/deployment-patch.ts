// The patch that projects a released Revision's hook contributions into its Deployment's pod
// template, marked with the run's uid: Knative keeps that template (it compares its
// deployment-hash label rather than the spec), so every pod of it starts with the bindings.
import { type Contribution, INJECTED_ANNOTATION } from '../../api/types.ts';
import { type PodView, podPatch } from './inject.ts';
import { type JsonPatchOp, pointer } from './jsonpatch.ts';

/** A Deployment's pod template, as much of it as the projection reads. */
export interface PodTemplateLike {
  metadata?: { annotations?: Record<string, string> };
  spec: PodView['spec'];
}

/** `marker` is the run's uid: a template that carries it already has this run's bindings. */
export function deploymentTemplatePatch(
  template: PodTemplateLike,
  contributions: readonly Contribution[],
  bindingRoot: string,
  marker: string,
): JsonPatchOp[] {
  // The pod patch, moved from the pod's root to the template's.
  const patch = podPatch({ spec: template.spec }, contributions, bindingRoot).map((op) => ({
    ...op,
    path: `/spec/template${op.path}`,
  }));
  if (template.metadata?.annotations === undefined || Object.keys(template.metadata.annotations).length === 0) {
    patch.push({
      op: 'add',
      path: template.metadata ? '/spec/template/metadata/annotations' : '/spec/template/metadata',
      value: template.metadata ? { [INJECTED_ANNOTATION]: marker } : { annotations: { [INJECTED_ANNOTATION]: marker } },
    });
  } else if (template.metadata.annotations[INJECTED_ANNOTATION] !== marker) {
    patch.push({ op: 'add', path: pointer('spec', 'template', 'metadata', 'annotations', INJECTED_ANNOTATION), value: marker });
  }
  return patch;
}
