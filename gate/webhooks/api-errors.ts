// The HTTP status of a failed Kubernetes API call (@kubernetes/client-node's ApiException), if any.
export function apiStatus(err: unknown): number | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number') return err.code;
  return undefined;
}

export const isNotFound = (err: unknown): boolean => apiStatus(err) === 404;
/** 409: someone else created or changed the object first; read it again and decide anew. */
export const isConflict = (err: unknown): boolean => apiStatus(err) === 409;
