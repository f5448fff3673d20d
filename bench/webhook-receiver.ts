/**
 * The receiver for `bench/webhooks.ts`, in its own process: answers 200 on /ok/*, 500 on
 * /fail/*, and records when each request arrived (by transaction id and event) for latency.
 */
const arrivals: { tx: string; event: string; at: number }[] = []
let count = 0
const server = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  async fetch(req) {
    const url = new URL(req.url)
    if (url.pathname === '/_stats')
      return Response.json({ count, arrivals: url.searchParams.has('arrivals') ? arrivals : [] })
    if (url.pathname === '/_reset') {
      count = 0
      arrivals.length = 0
      return new Response('ok')
    }
    const at = Date.now()
    const body = await req.text()
    if (url.pathname.startsWith('/fail/')) return new Response('no', { status: 500 })
    count++
    if (url.searchParams.has('record')) {
      const p = JSON.parse(body)
      arrivals.push({ tx: p.data.transaction_id, event: p.event, at })
    }
    return new Response('ok')
  },
})
console.log(`listening ${server.port}`)
