// Parses a kubectl-style label selector string ("team=a,tier in (web,api),!legacy") into the
// structured form webhook namespaceSelectors need, so one --namespace-selector flag scopes both
// the gate's informers and its webhooks.
import type { LabelSelector, LabelSelectorRequirement } from '../../api/types.ts';

export function parseLabelSelector(text: string): LabelSelector {
  const matchLabels: Record<string, string> = {};
  const matchExpressions: LabelSelectorRequirement[] = [];
  for (const part of splitTopLevel(text)) {
    const term = part.trim();
    if (term === '') continue;
    const set = /^([^\s!=()]+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(term);
    if (set) {
      const values = (set[3] ?? '')
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '');
      if (values.length === 0) throw new Error(`label selector: "${term}" needs at least one value`);
      matchExpressions.push({ key: set[1] ?? '', operator: set[2] === 'in' ? 'In' : 'NotIn', values });
      continue;
    }
    const notEqual = /^([^\s!=()]+)\s*!=\s*([^\s!=(),]*)$/.exec(term);
    if (notEqual) {
      matchExpressions.push({ key: notEqual[1] ?? '', operator: 'NotIn', values: [notEqual[2] ?? ''] });
      continue;
    }
    const equal = /^([^\s!=()]+)\s*==?\s*([^\s!=(),]*)$/.exec(term);
    if (equal) {
      const key = equal[1] ?? '';
      const value = equal[2] ?? '';
      if (key in matchLabels && matchLabels[key] !== value) throw new Error(`label selector: "${key}" cannot equal two values`);
      matchLabels[key] = value;
      continue;
    }
    const absent = /^!\s*([^\s!=()]+)$/.exec(term);
    if (absent) {
      matchExpressions.push({ key: absent[1] ?? '', operator: 'DoesNotExist' });
      continue;
    }
    if (/^[^\s!=()<>]+$/.test(term)) {
      matchExpressions.push({ key: term, operator: 'Exists' });
      continue;
    }
    throw new Error(`label selector: cannot parse "${term}" (use key=value, key!=value, key in (a,b), key notin (a,b), key or !key)`);
  }
  const selector: LabelSelector = {};
  if (Object.keys(matchLabels).length > 0) selector.matchLabels = matchLabels;
  if (matchExpressions.length > 0) selector.matchExpressions = matchExpressions;
  return selector;
}

/** Splits on commas outside parentheses: the values of `in (a,b)` stay together. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (c === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}
