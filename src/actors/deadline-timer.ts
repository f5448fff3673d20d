import { fromCallback } from 'xstate'
import type { DeadlineInput, TimerFired } from '../../machines/deadline-timer.ts'
import type { Clock } from '../lib/clock.ts'
import type { Scheduler } from './scheduler.ts'

/**
 * While the parent stays in its waiting state after the deadline (its reaction failed), fire again
 * this often.
 */
export const REFIRE_MS = 5_000

/**
 * The real `expiryTimer` / `backoffTimer` of the machines (machines/deadline-timer.ts): waits on
 * the shared scheduler for the absolute deadline the machine computed from its context, at once
 * when it has passed, then tells its parent. The parent stopping it (leaving the state, or the
 * actor stopping) cancels the wait. One heap entry per waiting actor, not a runtime timer each.
 */
export function deadlineTimer(scheduler: Scheduler, clock: Clock) {
  return fromCallback<TimerFired, DeadlineInput>(({ input, sendBack }) => {
    let stopped = false
    let cancel = () => {}
    function fire() {
      if (stopped) return
      // Armed again before telling the parent: leaving the state stops this child synchronously,
      // and must cancel it.
      cancel = scheduler.at(clock.now() + REFIRE_MS, fire)
      sendBack({ type: 'timer.fired', at: clock.now() })
    }
    // Already due (a fresh webhook delivery, an overdue restored actor): right after the parent has
    // started, not a timer tick later.
    if (input.at <= clock.now()) queueMicrotask(fire)
    else cancel = scheduler.at(input.at, fire)
    return () => {
      stopped = true
      cancel()
    }
  })
}
