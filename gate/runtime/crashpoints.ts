// Named points where a test can make the gate process die as if killed with -9
// (KNATIVE_PRESTART_CRASH_AT=<point>), to prove that a crash anywhere loses nothing. The same
// technique as etcd's gofail failpoints; without the variable every call is a no-op.
export type CrashPoint = 'after-run-created' | 'after-send' | 'after-reply-recorded' | 'before-release' | 'after-release';

const armed = process.env.KNATIVE_PRESTART_CRASH_AT;

export function crashPoint(point: CrashPoint): void {
  if (armed !== point) return;
  process.stderr.write(`knative-prestart: crash point ${point} reached; killing the process\n`);
  process.kill(process.pid, 'SIGKILL');
}
