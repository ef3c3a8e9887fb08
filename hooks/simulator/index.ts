// The simulator: what the gate would do with your hook's answer, without a cluster.
export { formatExchange, formatSimulation, formatVerdict } from './format.ts';
export { describeReplyLive } from './live.ts';
export { buildScenario, DEMO_IMAGE, DEMO_NAMESPACE, DEMO_REVISION, type Scenario, type ScenarioOptions } from './scenario.ts';
export { DEFAULT_SIMULATED_HOOK, type SimulateOptions, type SimulationResult, simulate } from './simulate.ts';
export { BINDING_ROOT, describeContributions, judge, SAMPLE_POD, type Verdict } from './verdict.ts';
