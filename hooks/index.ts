// Everything for hook authors: the SDK, the conformance checker, the simulator, the built-in hooks and their commands.

export * from './builtin/index.ts';
export { type CliIo, registerHookCommands } from './cli.ts';
export * from './conformance/index.ts';
export * from './sdk/index.ts';
export * from './simulator/index.ts';
