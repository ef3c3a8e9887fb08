// The report as text: one line per check, failures first so they are not lost in the passes.
import { type Check, type Report, RULE_IDS, RULES } from './rules.ts';

export function formatReport(report: Report, opts: { verbose?: boolean } = {}): string {
  const failures = report.checks.filter((c) => !c.passed);
  const lines = [`conformance of ${report.url} (hook "${report.hook}")`];
  for (const c of failures) lines.push(`FAIL ${c.rule}: ${c.detail}`);
  const passedRules = RULE_IDS.filter((id) => report.checks.some((c) => c.rule === id) && !failures.some((c) => c.rule === id));
  if (opts.verbose) {
    for (const c of report.checks.filter((x) => x.passed)) lines.push(`ok   ${c.rule}: ${c.detail}`);
  } else {
    for (const id of passedRules) lines.push(`ok   ${id}: ${RULES[id].title}`);
  }
  const failedRules = new Set(failures.map((c) => c.rule));
  lines.push(
    failures.length === 0
      ? `PASSED: ${passedRules.length} rules, ${report.checks.length} checks`
      : `FAILED: ${failedRules.size} of ${failedRules.size + passedRules.length} rules (${failures.length} of ${report.checks.length} checks); see ${[...failedRules].map((r) => RULES[r].section).join(', ')}`,
  );
  return lines.join('\n');
}

export function failuresOf(report: Report, rule?: string): Check[] {
  return report.checks.filter((c) => !c.passed && (rule === undefined || c.rule === rule));
}
