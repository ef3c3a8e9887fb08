// The hooks shipped with knative-prestart, written with the SDK: job, secret and approval.
export * from './approval/index.ts';
export { type BuiltinCliIo, registerBuiltinCommands } from './cli.ts';
export { errorLine as kubeErrorLine, loadKubeConfig } from './common/kube.ts';
export { type BuiltinHookOptions, type BuiltinKind, DEFAULT_POLL_MAX_MS, type ServeBuiltinOptions } from './common/serve.ts';
export { type RevisionResource, type VerifiedRequest, verifyRequest } from './common/verify.ts';
export * from './job/index.ts';
export * from './secret/index.ts';
