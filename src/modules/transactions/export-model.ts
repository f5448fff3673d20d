/**
 * The export's records and their two encodings, CSV and JSON lines
 * (docs/decisions/0064-priced-in-the-merchants-currency.md; every column is described in
 * docs/integrating/export.md).
 */

export const EXPORT_FORMATS = ['csv', 'jsonl'] as const
export type ExportFormat = (typeof EXPORT_FORMATS)[number]

/** The columns, in order: the CSV's header row and each JSON line's keys. */
export const EXPORT_COLUMNS = [
  'record_type',
  'transaction_id',
  'transaction_number',
  'refund_id',
  'status',
  'testing_mode',
  'created_at',
  'completed_at',
  'order_id',
  'currency',
  'amount_in_currency',
  'amount_usd',
  'usd_rate',
  'usd_rate_source',
  'usd_rate_feed',
  'usd_rate_round_id',
  'usd_rate_updated_at',
  'token_symbol',
  'token_amount',
  'blockchain_network',
  'transaction_hash',
  'block_number',
  'quote_method',
  'quoted_at',
  'token_usd_price',
  'token_usd_source',
  'token_usd_feed',
  'token_usd_round_id',
  'token_usd_updated_at',
  'currency_usd_rate',
  'currency_usd_source',
  'currency_usd_feed',
  'currency_usd_round_id',
  'currency_usd_updated_at',
] as const
export type ExportColumn = (typeof EXPORT_COLUMNS)[number]

/** One row of the export: every column, as text or null (an empty CSV cell, a JSON null). */
export type ExportRecord = Record<ExportColumn, string | null>

/** What each format is sent as. */
export const EXPORT_MEDIA_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  // JSON Lines (jsonlines.org); `application/x-ndjson` names the same format elsewhere.
  jsonl: 'application/jsonl; charset=utf-8',
}

/**
 * Characters that make a spreadsheet read a cell as a formula when they open it (OWASP, "CSV
 * Injection"): such a cell gets a leading `'`, which spreadsheets take as "this is text".
 */
const FORMULA_START = /^[=+\-@\t\r]/
/** RFC 4180: a field holding a comma, a double quote or a line break is quoted. */
const NEEDS_QUOTES = /[",\r\n]/

/** One CSV field: defused if a spreadsheet would evaluate it, then quoted if RFC 4180 says so. */
export function csvField(value: string | null): string {
  if (value === null || value === '') return ''
  const text = FORMULA_START.test(value) ? `'${value}` : value
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

/** One CSV line, CRLF-terminated (RFC 4180). */
export const csvLine = (fields: readonly (string | null)[]) =>
  `${fields.map(csvField).join(',')}\r\n`

export const CSV_HEADER = csvLine(EXPORT_COLUMNS)

/** A record as one CSV line, its fields in column order. */
export const csvRecord = (r: ExportRecord) => csvLine(EXPORT_COLUMNS.map((c) => r[c]))

/**
 * A record as one JSON line with the columns as keys, in order. JSON.stringify escapes line
 * breaks inside strings, so a line is always exactly one record.
 */
export const jsonRecord = (r: ExportRecord) =>
  `${JSON.stringify(Object.fromEntries(EXPORT_COLUMNS.map((c) => [c, r[c]])))}\n`
