/**
 * A JSON-RPC proxy on 127.0.0.1 in front of a node (anvil), for tests that need to count calls,
 * take the node away (refuse connections), hang it, lag a replica, change the chain between
 * two calls of one scan, or answer calls with a provider's or anvil's errors. `close()` ends it
 * (hanging requests included).
 */
import { createServer, type Server, type ServerResponse } from 'node:http'

export interface RpcCall {
  method: string
  params?: unknown
  id?: unknown
  /**
   * The path of the request it came in (clients told apart by the URL they were given: `${url}/a`).
   */
  path?: string
}

export interface RpcProxy {
  url: string
  /** pass: forward; refuse: drop the connection (a node that is down); hang: never answer. */
  mode: 'pass' | 'refuse' | 'hang'
  /** Every call forwarded, in order (a batch counts each of its calls). */
  calls: RpcCall[]
  /** Requests dropped while refusing. */
  refused: number
  /** Requests left unanswered while hanging. */
  hung: number
  /** Added to every eth_blockNumber answer: a replica behind the others. */
  blockNumberOffset: bigint
  /** When set, the calls of a batch are forwarded one at a time, each after this ran. */
  beforeCall: undefined | ((call: RpcCall) => Promise<void>)
  /** The node calls go to; change it to put another chain behind the same URL. */
  target: string
  /**
   * A provider's range cap: eth_getLogs over more blocks than this is refused with a JSON-RPC
   * error.
   */
  maxLogRange: number | null
  /** eth_getLogs calls refused for their range. */
  rangeRefusals: RpcCall[]
  /**
   * The next this many HTTP requests are answered 429 with `Retry-After: 1` (a provider's rate
   * limit).
   */
  rateLimitNext: number
  /** Requests answered 429. */
  rateLimited: number
  /**
   * The next this many HTTP requests are answered 200 with a JSON-RPC rate-limit error for each
   * call (as some providers do).
   */
  rateLimitJsonNext: number
  /**
   * The next this many eth_call calls are answered with the JSON-RPC error anvil 1.7 gives now and
   * then while it mines a block (-32602, "BlockOutOfRangeError: block height is 15 but requested
   * was 14").
   */
  callErrorNext: number
  /** eth_call calls answered with that error. */
  callErrors: RpcCall[]
  /**
   * Methods answered with JSON-RPC "Method not found" (-32601), as a node without them does
   * (debug_* and trace_* on most public RPCs).
   */
  refuseMethods: Set<string>
  close(): Promise<void>
}

export async function startRpcProxy(target: string): Promise<RpcProxy> {
  const hanging = new Set<ServerResponse>()
  const state: RpcProxy = {
    url: '',
    mode: 'pass',
    calls: [],
    refused: 0,
    hung: 0,
    blockNumberOffset: 0n,
    beforeCall: undefined,
    target,
    maxLogRange: null,
    rangeRefusals: [],
    rateLimitNext: 0,
    rateLimited: 0,
    rateLimitJsonNext: 0,
    callErrorNext: 0,
    callErrors: [],
    refuseMethods: new Set(),
    async close() {
      for (const res of hanging) res.destroy()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    if (state.mode === 'refuse') {
      state.refused++
      req.socket.destroy()
      return
    }
    if (state.mode === 'hang') {
      state.hung++
      hanging.add(res)
      return
    }
    if (state.rateLimitNext > 0) {
      state.rateLimitNext--
      state.rateLimited++
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: null,
          error: { code: -32005, message: 'Too Many Requests' },
        }),
      )
      return
    }
    let body = Buffer.concat(chunks).toString()
    const parsed = JSON.parse(body) as RpcCall | RpcCall[]
    if (state.rateLimitJsonNext > 0) {
      state.rateLimitJsonNext--
      state.rateLimited++
      const refuse = (c: RpcCall) => ({
        jsonrpc: '2.0',
        id: c.id,
        error: {
          code: -32005,
          message: 'Your app has exceeded its compute units per second capacity (rate limited)',
        },
      })
      return res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(Array.isArray(parsed) ? parsed.map(refuse) : refuse(parsed)))
    }
    let calls = (Array.isArray(parsed) ? parsed : [parsed]).map((c) =>
      Object.assign(c, { path: req.url ?? '/' }),
    )
    // Refused ranges and erring calls are answered here, in the shape of a node's error; the rest
    // go on.
    const answeredHere = new Map<RpcCall, { code: number; message: string }>()
    for (const c of calls) {
      if (
        state.maxLogRange !== null &&
        c.method === 'eth_getLogs' &&
        logSpan(c) > state.maxLogRange
      ) {
        state.rangeRefusals.push(c)
        answeredHere.set(c, {
          code: -32600,
          message: `exceed maximum block range: ${state.maxLogRange}`,
        })
      } else if (state.refuseMethods.has(c.method)) {
        answeredHere.set(c, {
          code: -32601,
          message: `the method ${c.method} does not exist/is not available`,
        })
      } else if (state.callErrorNext > 0 && c.method === 'eth_call') {
        state.callErrorNext--
        state.callErrors.push(c)
        answeredHere.set(c, {
          code: -32602,
          message: 'BlockOutOfRangeError: block height is 15 but requested was 14',
        })
      }
    }
    if (answeredHere.size) {
      calls = calls.filter((c) => !answeredHere.has(c))
      const errors = [...answeredHere].map(([c, error]) => ({ jsonrpc: '2.0', id: c.id, error }))
      if (calls.length === 0)
        return res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify(Array.isArray(parsed) ? errors : errors[0]))
      const answered = JSON.parse(
        await fetch(state.target, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(calls.map(({ path: _, ...c }) => c)),
        }).then((r) => r.text()),
      )
      state.calls.push(...calls)
      return res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify([...errors, ...answered]))
    }
    body = JSON.stringify(
      Array.isArray(parsed)
        ? calls.map(({ path: _, ...c }) => c)
        : (({ path: _, ...c }) => c)(calls[0]!),
    )
    state.calls.push(...calls)
    const forward = async (payload: string) => {
      const upstream = await fetch(state.target, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: payload,
      })
      return { status: upstream.status, text: await upstream.text() }
    }
    let { status, text } = state.beforeCall ? { status: 200, text: '' } : await forward(body)
    if (state.beforeCall) {
      const answers: unknown[] = []
      for (const call of calls) {
        await state.beforeCall(call)
        const { path: _, ...plain } = call
        answers.push(JSON.parse((await forward(JSON.stringify(plain))).text))
      }
      text = JSON.stringify(Array.isArray(parsed) ? answers : answers[0])
    }
    if (state.blockNumberOffset !== 0n) {
      const answers = JSON.parse(text) as
        | Array<{ id: unknown; result?: unknown }>
        | { id: unknown; result?: unknown }
      for (const answer of Array.isArray(answers) ? answers : [answers]) {
        const call = calls.find((c) => c.id === answer.id)
        if (call?.method === 'eth_blockNumber')
          answer.result = `0x${(BigInt(answer.result as string) + state.blockNumberOffset).toString(16)}`
      }
      text = JSON.stringify(answers)
    }
    res.writeHead(status, { 'content-type': 'application/json' }).end(text)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  state.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
  return state
}

/** Blocks an eth_getLogs call spans (0 for a call by block hash). */
function logSpan(call: RpcCall): number {
  const filter = (call.params as Array<{ fromBlock?: string; toBlock?: string }> | undefined)?.[0]
  if (
    !filter?.fromBlock ||
    !filter.toBlock ||
    !filter.fromBlock.startsWith('0x') ||
    !filter.toBlock.startsWith('0x')
  )
    return 0
  return Number(BigInt(filter.toBlock) - BigInt(filter.fromBlock)) + 1
}
