// What an apiserver request was, in the words of the apiserver's own metrics (verb, resource,
// subresource), for the gate's histogram of its own calls (prestart_gate_kube_request_duration_seconds).
// An operator reads there how long the writes that hold and release Revisions take, seen from the
// gate, beside apiserver_request_duration_seconds (seen from the apiserver): the gap is the network,
// the connection pool and the gate's event loop. Pure.

export interface KubeRequestKind {
  /** get, list, create, update, patch, delete (the apiserver's verbs). */
  verb: string;
  /** The plural, with its subresource when there is one: `prestartruns/status`. */
  resource: string;
}

const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);

/** Bounded labels: an unknown method or path is `other`, never the path itself (it names objects). */
export function kubeRequestKind(method: string, path: string): KubeRequestKind {
  // /api/v1/... or /apis/<group>/<version>/...; then [namespaces/<ns>/]<plural>[/<name>[/<subresource>]]
  const parts =
    path
      .split('?')[0]
      ?.split('/')
      .filter((p) => p.length > 0) ?? [];
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) rest = parts.slice(2);
  else if (parts[0] === 'apis' && parts.length >= 3) rest = parts.slice(3);
  else return { verb: verbOf(method, false), resource: 'other' };
  // A namespaced path; `namespaces/<name>` alone, or with its own subresource, is the Namespace itself.
  if (rest[0] === 'namespaces' && rest.length > 2 && !(rest.length === 3 && NAMESPACE_SUBRESOURCES.has(rest[2] ?? ''))) {
    rest = rest.slice(2);
  }
  const [plural, name, subresource] = rest;
  if (plural === undefined) return { verb: verbOf(method, false), resource: 'other' };
  return { verb: verbOf(method, name !== undefined), resource: subresource === undefined ? plural : `${plural}/${subresource}` };
}

function verbOf(method: string, named: boolean): string {
  switch (method.toUpperCase()) {
    case 'GET':
      return named ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return named ? 'delete' : 'deletecollection';
    default:
      return 'other';
  }
}
