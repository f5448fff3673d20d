// A shop that ran on Coinbase Commerce, as its code was written: the official SDK
// (coinbase-commerce-node, unmodified) in plain Node, pointed at this service by its base URL and
// key alone. Run as its own process by the tests (test/helpers/commerce-shop.ts), with
// NODE_EXTRA_CA_CERTS naming the test server's certificate, as a shop would trust its own.
//
// It reads one JSON command per line on stdin and answers one JSON line on stdout:
//   { id, op: 'init', key, base }                     Client.init(key, base)
//   { id, op: 'charge.create' | 'charge.retrieve' | 'charge.list' | 'charge.all', arg }
//   { id, op: 'charge.cancel' | 'charge.resolve', arg: idOrCode }   (the SDK's own client: it
//                                                                   has no method for these)
//   { id, op: 'checkout.create' | 'checkout.retrieve' | 'checkout.list' | 'checkout.update' |
//            'checkout.delete', arg, data }
//   { id, op: 'event.list' | 'event.retrieve', arg }
//   { id, op: 'hooks' }                               webhooks received so far
//   { id, op: 'secret', secret }                      the endpoint's shared secret
//   { id, op: 'verify', body, signature }             Webhook.verifyEventBody
// Answers: { id, ok: true, value } or { id, ok: false, error: { name, message, status } }.
// It also listens for webhooks on 127.0.0.1 (its port printed first: "listening <port>"),
// verifying each with Webhook.verifyEventBody and the secret as a shop does.
import { createServer } from 'node:http'
import { createInterface } from 'node:readline'
import commerce from 'coinbase-commerce-node'

const { Client, resources, Webhook } = commerce
const { Charge, Checkout, Event } = resources

let secret = ''
const hooks = []

const server = createServer((req, res) => {
  const chunks = []
  req.on('data', (c) => chunks.push(c))
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8')
    const signature = req.headers['x-cc-webhook-signature']
    let event = null
    let error = null
    try {
      event = Webhook.verifyEventBody(raw, signature, secret)
    } catch (e) {
      error = e?.constructor?.name ?? String(e)
    }
    hooks.push({
      body: raw,
      signature,
      verified: event !== null,
      error,
      type: event?.type ?? null,
    })
    res.writeHead(event ? 200 : 400).end()
  })
})

/** The SDK's own client for a request it has no method for. */
const raw = (method, path, data) =>
  new Promise((resolve, reject) =>
    Client.getInstance()[method](path, data, (error, response) =>
      error ? reject(error) : resolve(response.data.data),
    ),
  )

const plain = (v) => JSON.parse(JSON.stringify(v))

async function run(c) {
  switch (c.op) {
    case 'init':
      Client.init(c.key, c.base)
      return null
    case 'charge.create':
      return plain(await Charge.create(c.arg))
    case 'charge.retrieve':
      return plain(await Charge.retrieve(c.arg))
    case 'charge.list': {
      const [list, pagination] = await Charge.list(c.arg)
      return { list: plain(list), pagination }
    }
    case 'charge.all':
      return plain(await Charge.all(c.arg))
    case 'charge.cancel':
      return raw('postHttp', `charges/${c.arg}/cancel`, {})
    case 'charge.resolve':
      return raw('postHttp', `charges/${c.arg}/resolve`, {})
    case 'checkout.create':
      return plain(await Checkout.create(c.arg))
    case 'checkout.retrieve':
      return plain(await Checkout.retrieve(c.arg))
    case 'checkout.list': {
      const [list, pagination] = await Checkout.list(c.arg)
      return { list: plain(list), pagination }
    }
    case 'checkout.update':
      return plain(await Checkout.updateById(c.arg, c.data))
    case 'checkout.save': {
      // The SDK README's other way to update: a new Checkout with its id and the fields to change.
      const checkout = new Checkout()
      checkout.id = c.arg
      for (const [k, v] of Object.entries(c.data)) checkout[k] = v
      return plain(await checkout.save())
    }
    case 'checkout.insert': {
      // The README's instance way to create: a new Checkout with its fields, saved.
      const checkout = new Checkout()
      for (const [k, v] of Object.entries(c.data)) checkout[k] = v
      return plain(await checkout.save())
    }
    case 'checkout.instance-delete': {
      const checkout = new Checkout()
      checkout.id = c.arg
      await checkout.delete()
      return null
    }
    case 'checkout.delete':
      await Checkout.deleteById(c.arg)
      return null
    case 'event.list': {
      const [list, pagination] = await Event.list(c.arg)
      return { list: plain(list), pagination }
    }
    case 'event.retrieve':
      return plain(await Event.retrieve(c.arg))
    case 'hooks':
      return hooks
    case 'secret':
      secret = c.secret
      return null
    case 'verify':
      return plain(Webhook.verifyEventBody(c.body, c.signature, secret))
    default:
      throw new Error(`unknown op ${c.op}`)
  }
}

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`)
  createInterface({ input: process.stdin }).on('line', async (line) => {
    const c = JSON.parse(line)
    let answer
    try {
      answer = { id: c.id, ok: true, value: await run(c) }
    } catch (e) {
      answer = {
        id: c.id,
        ok: false,
        error: {
          name: e?.constructor?.name ?? String(e),
          message: e?.message ?? String(e),
          status: e?.code ?? null,
        },
      }
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`)
  })
})
