import { describe, expect, test } from 'bun:test'
import { keyedTurns } from '../../src/lib/keyed-turns.ts'

describe('keyedTurns()', () => {
  test('runs one key one after another, other keys beside it; a throw does not stop the next; busy and idle tell', async () => {
    const turns = keyedTurns()
    const log: string[] = []
    let releaseA!: () => void
    const a1 = turns('a', () => new Promise<void>((r) => (releaseA = r)).then(() => log.push('a1')))
    const a2 = turns('a', () => {
      log.push('a2')
      throw new Error('a2 failed')
    })
    const a3 = turns('a', () => log.push('a3'))
    await turns('b', () => log.push('b1'))
    // b ran while a1 still waited; a2 and a3 wait for it.
    expect(log).toEqual(['b1'])
    expect(turns.busy('a')).toBe(true)
    releaseA()
    await a1
    await expect(a2).rejects.toThrow('a2 failed')
    await a3
    await turns.idle()
    expect(log).toEqual(['b1', 'a1', 'a2', 'a3'])
    expect(turns.busy('a')).toBe(false)
    expect(turns.busy('b')).toBe(false)
  })
})
