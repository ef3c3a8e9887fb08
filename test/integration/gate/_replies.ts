// How test hooks answer lives in test/cluster/gate-replies.ts, shared with bench/.
export * from '../../cluster/gate-replies.ts';
