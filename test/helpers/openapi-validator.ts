import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { ROOT } from './processes.ts'

/**
 * JSON Schema checks against the committed openapi/openapi.json, with a validator nobody on this
 * project wrote (Ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses it): what the service sends must be
 * what the document says, webhook bodies and API responses alike.
 */
const document = JSON.parse(readFileSync(join(ROOT, 'openapi/openapi.json'), 'utf8'))
// Not strict: the document's OpenAPI words (and `discriminator`, whose `mapping` Ajv does not
// take; each event's `const` tells the oneOf apart anyway) are not schema keywords.
const ajv = new Ajv2020({ strict: false, allErrors: true })
addFormats(ajv)
ajv.addSchema({ ...document, $id: 'openapi' })

const compiled = new Map<string, ValidateFunction>()
function validator(name: string): ValidateFunction {
  let v = compiled.get(name)
  if (!v) {
    v = ajv.getSchema(`openapi#/components/schemas/${name}`)
    if (!v) throw new Error(`openapi/openapi.json has no schema ${name}`)
    compiled.set(name, v)
  }
  return v
}

/** The problems of `value` against the named component schema; [] when it conforms. */
export function schemaProblems(name: string, value: unknown): string[] {
  const v = validator(name)
  return v(value) ? [] : (v.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message}`)
}

const EVENT_SCHEMAS: Record<string, string> =
  document.components.schemas.WebhookEvent.discriminator.mapping

/** The headers the document declares for every delivery (`components.parameters`). */
const DELIVERY_HEADERS = Object.values<{ name: string; required: boolean }>(
  document.components.parameters,
)

/**
 * Throws, naming the problems, unless a delivery is what the document says: its body conforms
 * to WebhookEvent (checked against its own event's schema, so the problems name the fields, not
 * the union), every `x-service-*` and `webhook-*` header it carries is declared, and every
 * required one is there. `headers` as a receiver sees them, names in lower case.
 */
export function assertDelivery(body: string, headers: Record<string, string>): void {
  const value = JSON.parse(body)
  const ref = EVENT_SCHEMAS[value?.event]
  const problems = schemaProblems(ref ? ref.split('/').pop()! : 'WebhookEvent', value)
  for (const h of Object.keys(headers)) {
    if (/^(x-service-|webhook-)/.test(h) && !DELIVERY_HEADERS.some((d) => d.name === h))
      problems.push(`header ${h} is sent but not declared`)
  }
  for (const d of DELIVERY_HEADERS)
    if (d.required && headers[d.name] === undefined)
      problems.push(`required header ${d.name} is missing`)
  if (problems.length)
    throw new Error(
      `a delivery does not match openapi/openapi.json's webhooks: ${problems.join('; ')}\n${body}`,
    )
}
