/**
 * Fixed UTC windows of docs/decisions/0023-rate-limits-exact.md: start and end of the minute, hour
 * and day containing `now`.
 */
export const WINDOWS = ['minute', 'hour', 'day'] as const
export type WindowName = (typeof WINDOWS)[number]
const SIZE: Record<WindowName, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 }

export function windowStart(name: WindowName, now: number): number {
  return now - (now % SIZE[name])
}

export function windowEnd(name: WindowName, now: number): number {
  return windowStart(name, now) + SIZE[name]
}
