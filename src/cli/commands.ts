import { EVENT_TYPES } from '../../machines/transaction.machine.ts'
import { parseTxEvent } from '../actors/event-schema.ts'
import type { Outcome } from '../lib/outcome.ts'
import type { Services } from '../services.ts'
import { ENDPOINT_FORMATS, type EndpointView } from '../webhooks/endpoint.service.ts'
import type { DeliveryView } from '../webhooks/webhook.service.ts'

export type { Flags } from '../lib/command-line.ts'
import type { Flags } from '../lib/command-line.ts'
import { readinessBody } from '../operations/readiness.ts'

export type CommandResult =
  | { ok: true; result: Record<string, unknown> }
  | { ok: false; usage: boolean; message: string; details?: { path: string; message: string }[] }

interface Command {
  usage: string
  required: string[]
  /** Flags it also takes; any other flag is a usage error (a typo must not be ignored). */
  optional?: string[]
  /**
   * What else the flags must be, known before anything runs (a flag required only with some
   * other flag's value): usage errors like a missing required flag.
   */
  check?(f: Record<string, string>): { path: string; message: string }[]
  run(s: Services, f: Record<string, string>): Promise<Outcome<Record<string, unknown>>>
}

const int = (v: string) => (/^\d+$/.test(v) ? Number(v) : NaN)
const list = (v: string | undefined) =>
  v
    ? v
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    : []
const map = async <T, R>(p: Promise<Outcome<T>>, f: (v: T) => R): Promise<Outcome<R>> => {
  const r = await p
  return r.ok ? { ok: true, value: f(r.value) } : r
}
const projectView = (p: { id: string; name: string; status: string }) => ({
  id: p.id,
  name: p.name,
  status: p.status,
})
const iso = (d: Date | null) => d?.toISOString() ?? null
const endpointView = (e: EndpointView) => ({
  id: e.id,
  project: e.projectId,
  mode: e.mode,
  url: e.url,
  format: e.format,
  events: e.eventTypes,
  enabled: e.enabled,
  disabled_reason: e.disabledReason,
  disabled_at: iso(e.disabledAt),
  failing_since: iso(e.failingSince),
  created_at: iso(e.createdAt),
})
/** A flag holding an ISO 8601 date and time, or the refusal that names it. */
function timeFlag(flag: string, v: string): Outcome<Date> {
  const at = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(v)
    ? new Date(v)
    : new Date(NaN)
  return Number.isNaN(at.getTime())
    ? {
        ok: false,
        code: 'invalid_request',
        message: `--${flag} must be an ISO 8601 date and time, like 2026-11-20T08:00:00Z`,
      }
    : { ok: true, value: at }
}
const deliveryView = (d: DeliveryView) => ({
  id: d.id,
  event_id: d.eventId,
  endpoint: d.endpointId,
  mode: d.mode,
  event: d.eventType,
  transaction_id: d.transactionId,
  test: d.test,
  status: d.status,
  failed_because: d.failedBecause,
  attempts: d.attempts,
  retry_count: d.retryCount,
  next_retry_at: iso(d.nextAttemptAt),
  last_attempt_at: iso(d.lastAttemptAt),
  last_status_code: d.lastStatusCode,
  created_at: iso(d.createdAt),
})

/**
 * docs/decisions/0025-operator-cli.md: the operator's commands. The CLI and the admin socket both
 * run them through `runCommand`.
 */
export const COMMANDS: Record<string, Command> = {
  'project create': {
    usage: 'project create --name NAME',
    required: ['name'],
    run: (s, f) => map(s.projects.create(f.name), projectView),
  },
  'project set-status': {
    usage: 'project set-status --project ID --status active|inactive',
    required: ['project', 'status'],
    run: (s, f) => map(s.projects.setStatus(f.project, f.status), projectView),
  },
  'project set-limits': {
    usage: 'project set-limits --project ID --minute N --hour N --day N',
    required: ['project', 'minute', 'hour', 'day'],
    run: (s, f) =>
      map(
        s.projects.setLimits(f.project, {
          minute: int(f.minute),
          hour: int(f.hour),
          day: int(f.day),
        }),
        (p) => ({ ...projectView(p), limits: p.limits }),
      ),
  },
  'project set-xpub': {
    usage:
      "project set-xpub --project ID --mode test|live --xpub XPUB   (m/44'/60'/0'/0 of your wallet: deposit addresses are its accounts)",
    required: ['project', 'mode', 'xpub'],
    run: (s, f) =>
      map(s.deposits.setXpub(f.project, f.mode, f.xpub), (r) => ({
        project: r.projectId,
        mode: r.mode,
        xpub: r.xpub,
        first_addresses: r.firstAddresses,
      })),
  },
  'project set-x402-pay-to': {
    usage:
      'project set-x402-pay-to --project ID --mode test|live --address 0x...   (where payments of your own resources over x402 go: your treasury; docs/decisions/0063-x402.md)',
    required: ['project', 'mode', 'address'],
    run: (s, f) =>
      map(s.facilitator.setPayTo(f.project, f.mode, f.address), (r) => ({
        project: r.projectId,
        mode: r.mode,
        pay_to: r.payTo,
      })),
  },
  'project set-ip-allowlist': {
    usage: 'project set-ip-allowlist --project ID --cidrs a,b   (empty clears)',
    required: ['project', 'cidrs'],
    run: (s, f) =>
      map(s.projects.setIpAllowlist(f.project, list(f.cidrs)), (p) => ({
        ...projectView(p),
        ip_allowlist: p.ipAllowlist,
      })),
  },
  'key create': {
    usage: 'key create --project ID --mode test|live --name NAME [--scopes a,b]',
    required: ['project', 'mode', 'name'],
    optional: ['scopes'],
    run: (s, f) =>
      map(
        s.keys.create({
          projectId: f.project,
          mode: f.mode,
          name: f.name,
          scopes: f.scopes === undefined ? undefined : list(f.scopes),
        }),
        (k) => ({
          id: k.record.id,
          key: k.key,
          mode: k.record.mode,
          scopes: k.record.scopes,
        }),
      ),
  },
  'key revoke': {
    usage: 'key revoke --key-id ID',
    required: ['key-id'],
    run: (s, f) =>
      map(s.keys.revoke(f['key-id']), (k) => ({
        id: k.id,
        revoked_at: k.revokedAt?.toISOString() ?? null,
      })),
  },
  'key delete': {
    usage: 'key delete --key-id ID',
    required: ['key-id'],
    run: (s, f) => map(s.keys.delete(f['key-id']), (k) => ({ id: k.id, deleted: true })),
  },
  'key list': {
    usage: 'key list --project ID',
    required: ['project'],
    run: async (s, f) => {
      if (!(await s.projects.get(f.project)))
        return { ok: false, code: 'not_found', message: `No project ${f.project}` }
      return {
        ok: true,
        value: {
          keys: (await s.keys.list(f.project)).map((k) => ({
            id: k.id,
            name: k.name,
            mode: k.mode,
            prefix: k.displayPrefix,
            scopes: k.scopes,
            created_at: k.createdAt.toISOString(),
            last_used_at: k.lastUsedAt?.toISOString() ?? null,
            revoked_at: k.revokedAt?.toISOString() ?? null,
          })),
        },
      }
    },
  },
  'transaction event': {
    usage:
      'transaction event --id UUID --event JSON   (test-mode transactions only; e.g. {"type":"cancel.requested","by":"merchant"})',
    required: ['id', 'event'],
    run: async (s, f) => {
      let event: unknown
      try {
        event = JSON.parse(f.event)
      } catch {
        return {
          ok: false,
          code: 'invalid_request',
          message: '--event must be a JSON lifecycle event such as {"type":"customer.confirmed"}',
        }
      }
      const parsed = parseTxEvent(event)
      if (!parsed)
        return {
          ok: false,
          code: 'invalid_request',
          message: `--event is not a well-formed lifecycle event; types: ${EVENT_TYPES.join(', ')} (fields as in machines/transaction.machine.ts)`,
        }
      return map(s.driveTestTransaction(f.id, parsed), (r) => ({
        id: r.id,
        status: r.status,
        version: r.version,
      }))
    },
  },
  'endpoint create': {
    usage: `endpoint create --project ID --mode test|live --url U --events e1,e2 [--format ${ENDPOINT_FORMATS.join('|')}]   (commerce: Coinbase Commerce's webhooks, every charge event, no --events)`,
    required: ['project', 'mode', 'url'],
    optional: ['events', 'format'],
    // A standard endpoint names its events; a Commerce one hears every charge event. An unknown
    // format is left to the service, which names the formats.
    check: (f) =>
      f.events === undefined && (f.format === undefined || f.format === 'standard')
        ? [{ path: '--events', message: 'is required (unless --format commerce)' }]
        : [],
    run: (s, f) =>
      map(
        s.endpoints.create({
          projectId: f.project,
          mode: f.mode,
          url: f.url,
          eventTypes: list(f.events),
          format: f.format,
        }),
        (r) => ({ ...endpointView(r.endpoint), secret: r.secret }),
      ),
  },
  'endpoint list': {
    usage: 'endpoint list --project ID [--mode test|live]',
    required: ['project'],
    optional: ['mode'],
    run: async (s, f) => {
      if (f.mode !== undefined && f.mode !== 'test' && f.mode !== 'live')
        return { ok: false, code: 'invalid_request', message: '--mode must be test or live' }
      if (!(await s.projects.get(f.project)))
        return { ok: false, code: 'not_found', message: `No project ${f.project}` }
      return {
        ok: true,
        value: {
          endpoints: (await s.endpoints.list(f.project, f.mode as 'test' | 'live' | undefined)).map(
            endpointView,
          ),
        },
      }
    },
  },
  'endpoint rotate-secret': {
    usage: 'endpoint rotate-secret --endpoint ID',
    required: ['endpoint'],
    run: (s, f) =>
      map(s.endpoints.rotateSecret(f.endpoint), (r) => ({ id: r.endpoint.id, secret: r.secret })),
  },
  'endpoint reveal-secret': {
    usage: 'endpoint reveal-secret --endpoint ID',
    required: ['endpoint'],
    run: (s, f) => map(s.endpoints.revealSecret(f.endpoint), (r) => r),
  },
  'endpoint disable': {
    usage: 'endpoint disable --endpoint ID',
    required: ['endpoint'],
    run: (s, f) => map(s.endpoints.setEnabled(f.endpoint, false), endpointView),
  },
  'endpoint enable': {
    usage:
      'endpoint enable --endpoint ID [--recover-since ISO_TIME]   (recover: send again every failed delivery since then)',
    required: ['endpoint'],
    optional: ['recover-since'],
    run: async (s, f) => {
      const since =
        f['recover-since'] === undefined ? null : timeFlag('recover-since', f['recover-since'])
      if (since && !since.ok) return since
      const enabled = await s.endpoints.setEnabled(f.endpoint, true)
      if (!enabled.ok || !since) return map(Promise.resolve(enabled), endpointView)
      return map(s.webhooks.recover(f.endpoint, since.value), (r) => ({
        ...endpointView(enabled.value),
        recovered: { since: r.since.toISOString(), redelivered: r.redelivered, busy: r.busy },
      }))
    },
  },
  'endpoint recover': {
    usage:
      'endpoint recover --endpoint ID --since ISO_TIME   (send again every failed delivery to it created since then)',
    required: ['endpoint', 'since'],
    run: async (s, f) => {
      const since = timeFlag('since', f.since)
      if (!since.ok) return since
      return map(s.webhooks.recover(f.endpoint, since.value), (r) => ({
        endpoint: r.endpointId,
        since: r.since.toISOString(),
        redelivered: r.redelivered,
        busy: r.busy,
      }))
    },
  },
  'endpoint test': {
    usage: 'endpoint test --endpoint ID --event TYPE   (a signed test event, marked "test": true)',
    required: ['endpoint', 'event'],
    run: (s, f) => map(s.webhooks.sendTest(f.endpoint, f.event), deliveryView),
  },
  'delivery list': {
    usage:
      'delivery list --project ID [--mode test|live] [--status pending|retrying|success|failed] [--endpoint ID] [--transaction UUID] [--limit N] [--before DELIVERY_ID]',
    required: ['project'],
    optional: ['mode', 'status', 'endpoint', 'transaction', 'limit', 'before'],
    run: async (s, f) => {
      if (f.mode !== undefined && f.mode !== 'test' && f.mode !== 'live')
        return { ok: false, code: 'invalid_request', message: '--mode must be test or live' }
      return map(
        s.webhooks.listDeliveries(
          { projectId: f.project, mode: f.mode as 'test' | 'live' | undefined },
          {
            status: f.status,
            endpointId: f.endpoint,
            transactionId: f.transaction,
            limit: f.limit === undefined ? undefined : int(f.limit),
            before: f.before,
          },
        ),
        (ds) => ({ deliveries: ds.map(deliveryView) }),
      )
    },
  },
  'delivery show': {
    usage: 'delivery show --delivery ID',
    required: ['delivery'],
    run: (s, f) =>
      map(s.webhooks.getDelivery(f.delivery), (d) => ({
        ...deliveryView(d.delivery),
        data: d.data,
        attempts: d.attempts.map((a) => ({
          number: a.number,
          trigger: a.trigger,
          scheduled_for: a.scheduledFor?.toISOString() ?? null,
          started_at: a.startedAt.toISOString(),
          duration_ms: a.durationMs,
          status_code: a.statusCode,
          error: a.error,
          request_body: a.requestBody,
          response_body: a.responseBody,
        })),
      })),
  },
  'delivery redeliver': {
    usage: 'delivery redeliver --delivery ID',
    required: ['delivery'],
    run: (s, f) => map(s.webhooks.redeliver(f.delivery), deliveryView),
  },
  'network forget': {
    usage:
      'network forget --network NAME   (after its chain was really reset: follow the new chain from its head; nothing of the old one changes)',
    required: ['network'],
    run: (s, f) => s.chain.forget(f.network),
  },
  'network resume': {
    usage:
      'network resume --network NAME [--from-block N]   (after a reorg deeper than its follower remembers halted it: re-check what was recorded from block N on, default one window below the blocks remembered at the halt, and follow again)',
    required: ['network'],
    optional: ['from-block'],
    run: (s, f) => {
      const from = f['from-block']
      if (from !== undefined && !/^\d{1,18}$/.test(from))
        return Promise.resolve({
          ok: false,
          code: 'invalid_request',
          message: '--from-block must be a block number (0 or more)',
        })
      return s.chain.resume(f.network, from === undefined ? undefined : BigInt(from))
    },
  },
  'refund abandon': {
    usage:
      "refund abandon --refund ID   (give up a refund's recorded payment the chain shows can never be mined; the refund is pending again)",
    required: ['refund'],
    run: async (s, f) => {
      const owner = await s.refunds.ownerOf(f.refund)
      if (!owner) return { ok: false, code: 'not_found', message: `No refund ${f.refund}` }
      return map(s.refunds.abandon(owner, f.refund), (r) => ({
        id: r.id,
        status: r.status,
        transaction_id: r.transaction_id,
      }))
    },
  },
  status: {
    usage:
      "status   (readiness as GET /readyz reports it: database, migrations, DATA_DIR, each network's follower, the relayer's balances)",
    required: [],
    run: async (s) => {
      const report = await s.readiness.report()
      return { ok: true, value: readinessBody(report) }
    },
  },
  'user create': {
    usage: 'user create --email E --password P --project ID',
    required: ['email', 'password', 'project'],
    run: (s, f) =>
      map(s.users.create({ email: f.email, password: f.password, projectId: f.project }), (u) => ({
        id: u.id,
        email: u.email,
        project: u.projectId,
      })),
  },
}

export const USAGE = `Usage: npm run cli -- <command> [--json]\n\nCommands:\n${Object.values(
  COMMANDS,
)
  .map((c) => `  ${c.usage}`)
  .join('\n')}`

/** A command line that names a known command with every flag it needs. */
export interface PreparedCommand {
  command: Command
  values: Record<string, string>
}

/** Checks the words and flags of a command line, without touching any database. */
export function prepareCommand(
  words: string[],
  flags: Flags,
): PreparedCommand | Extract<CommandResult, { ok: false }> {
  const name = words.join(' ')
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
  if (!command)
    return {
      ok: false,
      usage: true,
      message: words.length ? `Unknown command "${name}".\n\n${USAGE}` : USAGE,
    }
  const values: Record<string, string> = {}
  const problems: { path: string; message: string }[] = []
  for (const [k, v] of Object.entries(flags)) {
    if (k === 'json') continue
    if (v === true) {
      // `--cidrs` with nothing after it clears the allow-list.
      if (k === 'cidrs') values[k] = ''
      else problems.push({ path: `--${k}`, message: 'needs a value' })
    } else values[k] = v
  }
  for (const r of command.required)
    if (values[r] === undefined) problems.push({ path: `--${r}`, message: 'is required' })
  problems.push(...(command.check?.(values) ?? []))
  const known = new Set([...command.required, ...(command.optional ?? [])])
  for (const k of Object.keys(values))
    if (!known.has(k))
      problems.push({ path: `--${k}`, message: 'is not an option of this command' })
  if (problems.length)
    return {
      ok: false,
      usage: true,
      message: `${problems.map((p) => `${p.path} ${p.message}`).join('; ')}\nUsage: npm run cli -- ${command.usage}`,
      details: problems,
    }
  return { command, values }
}

/** Checks a command line, then runs it. */
export async function runCommand(
  services: Services,
  words: string[],
  flags: Flags,
): Promise<CommandResult> {
  const prepared = prepareCommand(words, flags)
  if ('ok' in prepared) return prepared
  const out = await prepared.command.run(services, prepared.values)
  return out.ok
    ? { ok: true, result: out.value }
    : { ok: false, usage: false, message: out.message, details: out.details }
}
