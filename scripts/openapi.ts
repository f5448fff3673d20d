import { writeFileSync } from 'node:fs'
import { formatDocument, openapiDocument } from '../src/http/openapi-document.ts'

/** `npm run openapi`: writes openapi/openapi.json; a test fails when it drifts from the app. */
const path = new URL('../openapi/openapi.json', import.meta.url).pathname
writeFileSync(path, formatDocument(await openapiDocument()))
console.log(`wrote ${path}`)
