// The gate as a CLI process lives in test/cluster/gate-process.ts, shared with bench/.
export * from '../../cluster/gate-process.ts';
