// ava settings of the end-to-end suite (`npm run test:e2e`, through test/run.ts --e2e): only its
// files, one at a time, and a longer inactivity timeout, since a test waits out Knative's retry
// backoff on purpose (about 45 s with nothing finishing).
export default {
  files: ['test/e2e/**/*.test.ts'],
  extensions: { ts: 'module' },
  nodeArguments: ['--import=tsx'],
  timeout: '3m',
  concurrency: 1,
  workerThreads: false,
};
