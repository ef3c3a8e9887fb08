// A strict RFC 6902 applier for the tests, so a patch is checked by what it does to an object
// (the way the apiserver applies it), not by its exact text.
import type { JsonPatchOp } from '../../../../gate/core/jsonpatch.ts';

type Json = unknown;

export function applyPatch<T>(doc: T, patch: readonly JsonPatchOp[]): T {
  let root: Json = structuredClone(doc);
  for (const op of patch) root = applyOne(root, op);
  return root as T;
}

function tokens(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new Error(`bad pointer ${path}`);
  return path
    .slice(1)
    .split('/')
    .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function applyOne(root: Json, op: JsonPatchOp): Json {
  const parts = tokens(op.path);
  const last = parts.pop();
  if (last === undefined) {
    if (op.op === 'remove') throw new Error('cannot remove the root');
    return structuredClone(op.value);
  }
  let parent: Json = root;
  for (const t of parts) {
    if (Array.isArray(parent)) parent = parent[index(parent, t, false)];
    else if (isObject(parent) && Object.hasOwn(parent, t)) parent = parent[t];
    else throw new Error(`${op.op} ${op.path}: missing parent at ${t}`);
  }
  if (Array.isArray(parent)) {
    switch (op.op) {
      case 'add':
        parent.splice(last === '-' ? parent.length : index(parent, last, true), 0, structuredClone(op.value));
        break;
      case 'remove':
        parent.splice(index(parent, last, false), 1);
        break;
      case 'replace':
        parent[index(parent, last, false)] = structuredClone(op.value);
        break;
      case 'test':
        if (JSON.stringify(parent[index(parent, last, false)]) !== JSON.stringify(op.value)) throw new Error(`test ${op.path} failed`);
        break;
    }
    return root;
  }
  if (!isObject(parent)) throw new Error(`${op.op} ${op.path}: parent is not a container`);
  switch (op.op) {
    case 'add':
      parent[last] = structuredClone(op.value);
      break;
    case 'remove':
    case 'replace':
      if (!Object.hasOwn(parent, last)) throw new Error(`${op.op} ${op.path}: no such member`);
      if (op.op === 'remove') delete parent[last];
      else parent[last] = structuredClone(op.value);
      break;
    case 'test':
      if (JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw new Error(`test ${op.path} failed`);
      break;
  }
  return root;
}

function index(arr: unknown[], token: string, forAdd: boolean): number {
  if (!/^(0|[1-9]\d*)$/.test(token)) throw new Error(`bad array index ${token}`);
  const i = Number(token);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new Error(`array index ${i} out of range`);
  return i;
}

function isObject(v: Json): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
