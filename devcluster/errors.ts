/**
 * A cluster that cannot start fails with this error. `summary` is one line that names the cause
 * and what to do; `details` (log tail of a component, if any) comes before it in `message`, so
 * the last line a user sees is the one that explains.
 */
export class ClusterStartError extends Error {
  override readonly name = 'ClusterStartError';
  readonly summary: string;
  readonly details: string;

  constructor(summary: string, details = '') {
    super(details ? `${details}\n${summary}` : summary);
    this.summary = summary;
    this.details = details;
  }
}
