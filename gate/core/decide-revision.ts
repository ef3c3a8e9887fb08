// The controller's whole decision for one Revision: the admin's break glass first (force-release.ts),
// else decide()'s rules, then the gate's condition on the Revision for kn's view
// (revision-condition.ts). Each part is pure and tested on its own.
import { decide } from './decide.ts';
import { forceRelease } from './force-release.ts';
import { withRevisionCondition } from './revision-condition.ts';
import type { Decision, Observed } from './types.ts';

export function decideRevision(o: Observed): Decision {
  return withRevisionCondition(o, forceRelease(o) ?? decide(o));
}
