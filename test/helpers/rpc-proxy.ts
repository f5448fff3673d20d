/**
 * A JSON-RPC proxy on 127.0.0.1 in front of a node (anvil), for tests that need to count calls,
 * take the node away (refuse connections), hang it, lag a replica, or change the chain between
 * two calls of one scan. `close()` ends it (hanging requests included).
 */
import { createServer, type Server, type ServerResponse } from 'node:http'

export interface RpcCall {
  method: string
  params?: unknown
  id?: unknown
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
    const body = Buffer.concat(chunks).toString()
    const parsed = JSON.parse(body) as RpcCall | RpcCall[]
    const calls = Array.isArray(parsed) ? parsed : [parsed]
    state.calls.push(...calls)
    const forward = async (payload: string) => {
      const upstream = await fetch(state.target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload })
      return { status: upstream.status, text: await upstream.text() }
    }
    let { status, text } = state.beforeCall ? { status: 200, text: '' } : await forward(body)
    if (state.beforeCall) {
      const answers: unknown[] = []
      for (const call of calls) {
        await state.beforeCall(call)
        answers.push(JSON.parse((await forward(JSON.stringify(call))).text))
      }
      text = JSON.stringify(Array.isArray(parsed) ? answers : answers[0])
    }
    if (state.blockNumberOffset !== 0n) {
      const answers = JSON.parse(text) as Array<{ id: unknown; result?: unknown }> | { id: unknown; result?: unknown }
      for (const answer of Array.isArray(answers) ? answers : [answers]) {
        const call = calls.find((c) => c.id === answer.id)
        if (call?.method === 'eth_blockNumber') answer.result = `0x${(BigInt(answer.result as string) + state.blockNumberOffset).toString(16)}`
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
