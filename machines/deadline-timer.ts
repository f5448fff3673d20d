import { fromCallback } from 'xstate'

/**
 * The timer child both machines invoke for an absolute deadline
 * (docs/decisions/0013-absolute-deadlines.md, docs/decisions/0019-retry-schedule.md). XState does
 * not keep pending `after` timers across a persisted snapshot (statelyai/xstate#5331), so a waiting
 * state invokes this child with the deadline computed from its context instead: a restored actor
 * restarts its invoked children, and the child arms itself again from the same absolute time,
 * firing at once when that time has passed.
 *
 * The machines stay pure: this default never fires. The runtime provides the real
 * implementation (`machine.provide({ actors: { ... } })`, src/actors/deadline-timer.ts) over an
 * injected clock, so tests run it on a virtual one.
 */
export interface DeadlineInput {
  /** Epoch ms. */
  at: number
}

/**
 * What the timer sends its parent when the deadline has passed (again every few seconds while the
 * parent stays).
 */
export interface TimerFired {
  type: 'timer.fired'
  /** The time it fired, epoch ms. */
  at: number
}

export const inertDeadlineTimer = fromCallback<TimerFired, DeadlineInput>(() => () => {})
