import { writeFileSync } from 'node:fs'
import { formatDocument, openapiDocument } from '../src/http/openapi-document.ts'
import { apiTypes } from './openapi-types.ts'

/**
 * `npm run openapi`: writes openapi/openapi.json and the types @crypto-pay/verify-webhook ships;
 * a test fails when either drifts from the app.
 */
const documentPath = new URL('../openapi/openapi.json', import.meta.url).pathname
const typesPath = new URL('../src/webhooks/verify-webhook/api.d.mts', import.meta.url).pathname
const text = formatDocument(await openapiDocument())
writeFileSync(documentPath, text)
writeFileSync(typesPath, await apiTypes(text))
console.log(`wrote ${documentPath} and ${typesPath}`)
