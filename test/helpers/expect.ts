import { expect } from 'bun:test'

/** Asserts a response's status; on a mismatch the failure shows the body, which says why. */
export async function expectStatus(res: Response, status: number): Promise<void> {
  const body = res.status === status ? '' : await res.clone().text()
  expect({ status: res.status, body }).toEqual({ status, body: '' })
}
