// The gate's one source of time. gate/gate.ts makes it once and hands the same clock to the
// controller (Observed.now), the actions it applies (event timestamps) and the reply recorder
// (answeredAt), so a test or a simulation can move all three together.
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
