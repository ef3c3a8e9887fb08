// Which image the job hook runs with params.useRevisionImage: the reference the request named for
// the container (its digest, else its image where Knative does not resolve the registry). Never
// the Revision's status read back: a namespace editor can write status.containerStatuses, and a
// tag can move, so that could differ from what the other hooks approved. Pure, for unit tests.
import type { ContainerImage } from '../../../api/types.ts';
import { referenceToRun } from '../../../schemas/index.ts';

export interface RequestImageInput {
  /** The request's revision.containers; undefined from a version 1 gate. */
  requested: readonly ContainerImage[] | undefined;
  /** What the gate recorded on the PrestartRun before it sent the request (spec.containers). */
  recorded: readonly ContainerImage[] | undefined;
  /** params.container; default: the first container that is not an init container. */
  container: string | undefined;
  /** namespace/name, for messages. */
  revision: string;
}

/** The container and the reference to run, or why there is none (one sentence, the hook's failure message). */
export function imageFromRequest(input: RequestImageInput): { name: string; image: string } | string {
  const { requested, recorded, revision } = input;
  if (requested === undefined) {
    return `the request names no containers (it comes from a gate older than protocol version 2), so it does not say which digest will run: params.useRevisionImage needs a gate that sends revision.containers; upgrade the gate, or name params.image`;
  }
  const chosen = input.container === undefined ? requested.find((c) => !c.init) : requested.find((c) => c.name === input.container);
  if (!chosen) {
    const names = requested.map((c) => c.name).join(', ') || 'none';
    return input.container === undefined
      ? `the request names no container of Revision ${revision} that is not an init container (it names: ${names})`
      : `the request names no container "${input.container}" (params.container) of Revision ${revision}; it names: ${names}`;
  }
  // Anyone who can post to the hook can make up a request (docs/protocol.md, rule 5), so what it
  // names must be what the gate recorded on the run it verified, or the Job would run a stranger's image.
  const record = recorded?.find((c) => c.name === chosen.name);
  if (recorded === undefined || !record) {
    return `cannot confirm the request's image: PrestartRun ${revision} records no container "${chosen.name}" (spec.containers), so the request was not the gate's, or the gate predates protocol version 2`;
  }
  if (referenceToRun(record) !== referenceToRun(chosen) || record.image !== chosen.image) {
    return `cannot confirm the request's image: it names ${referenceToRun(chosen)} for container "${chosen.name}", but PrestartRun ${revision} records ${referenceToRun(record)}`;
  }
  return { name: chosen.name, image: referenceToRun(chosen) };
}
