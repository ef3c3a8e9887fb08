// The gate harness lives in test/cluster/gate-harness.ts, shared with bench/; tests import it from here.
export * from '../../cluster/gate-harness.ts';
