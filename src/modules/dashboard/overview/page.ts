import { html, jsonForScript } from '../../../lib/html.ts'
import type { DailyStats } from '../../stats/service.ts'
import { STATUSES } from '../../transactions/model.ts'
import { formatMoney } from '../../pay/view.ts'
import { base, formatCount, layout, table, type Frame } from '../layout.ts'
import type { OverviewStats } from '../service.ts'

/**
 * Every day from `start` to `end` (YYYY-MM-DD, both included), with zeros where nothing
 * happened.
 */
export function fillDays(start: string, end: string, daily: DailyStats[]): DailyStats[] {
  const byDate = new Map(daily.map((d) => [d.date, d]))
  const out: DailyStats[] = []
  for (
    let t = Date.parse(`${start}T00:00:00Z`);
    t <= Date.parse(`${end}T00:00:00Z`) && out.length < 3700;
    t += 86_400_000
  ) {
    const date = new Date(t).toISOString().slice(0, 10)
    out.push(
      byDate.get(date) ?? {
        date,
        total_transactions: 0,
        completed_transactions: 0,
        total_volume_usd: 0,
        conversion_rate: 0,
      },
    )
  }
  return out
}

// Made once: Number#toLocaleString with options builds a formatter per call (88 µs here), and a
// year's overview formats a percentage for each of its 365 days.
const PERCENT = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 })
const percent = (n: number) => `${PERCENT.format(n)}%`

/**
 * The statistics of docs/integrating/api.md#lists-and-statistics for a date range, a chart of daily
 * volume and conversion, and the numbers behind it.
 */
export function overviewPage(
  f: Frame,
  range: { start: string; end: string },
  data: { stats: OverviewStats; daily: DailyStats[] } | null,
  error: string | null,
): string {
  const form = html`<form method="get" action="${base(f)}" class="filters" aria-label="Date range">
  <label>From <input type="date" name="start_date" value="${range.start}" required></label>
  <label>To <input type="date" name="end_date" value="${range.end}" required></label>
  <button type="submit" class="button secondary">Show</button>
</form>`
  if (!data) return layout(f, 'overview', 'Overview', form, { error })
  const s = data.stats
  const days = fillDays(range.start, range.end, data.daily)
  const dayRows = days
    .filter((d) => d.total_transactions > 0)
    .map(
      (d) =>
        html`<tr><td>${d.date}</td><td>${d.total_transactions}</td><td>${[
          html`${d.completed_transactions}</td><td>${formatMoney(d.total_volume_usd, 'USD')}</td>`,
          html`<td>${percent(d.conversion_rate)}</td></tr>`,
        ]}`,
    )
  const byStatus = STATUSES.map(
    (st) =>
      html`<li><a href="${base(f, `/transactions?status=${st}`)}"><span>${st}</span> ${[
        html`<strong data-status-count="${st}">${s.by_status[st]}</strong></a></li>`,
      ]}`,
  )
  const body = html`${form}
<p class="muted">Transactions created from ${range.start} to ${range.end} (UTC), ${f.mode} mode.</p>
<dl class="stats">
  <div><dt>Transactions</dt><dd data-stat="total_transactions">${[
    formatCount(s.total_transactions),
  ]}</dd></div>
  <div><dt>Completed</dt><dd data-stat="completed_transactions">${[
    formatCount(s.completed_transactions),
  ]}</dd></div>
  <div><dt>Completed volume, every currency in USD (at creation)</dt><dd data-stat="total_volume_usd"
    data-value="${s.total_volume_usd}">${formatMoney(s.total_volume_usd, 'USD')}</dd></div>
  ${Object.entries(s.volume_by_currency).map(
    ([currency, amount]) =>
      html`<div><dt>Completed, charged in ${currency}</dt><dd data-currency-volume="${currency}"
    data-value="${amount}">${formatMoney(amount, currency)}</dd></div>`,
  )}
  <div><dt>Conversion</dt><dd data-stat="conversion_rate"
    data-value="${s.conversion_rate}">${percent(s.conversion_rate)}</dd></div>
</dl>
<section aria-labelledby="chart-title">
  <h2 id="chart-title">Daily volume and conversion</h2>
  <div id="chart" class="chart" aria-hidden="true"></div>
  <script type="application/json" id="chart-data">${jsonForScript(days)}</script>
  <details class="chart-table"><summary>The numbers by day</summary>
  ${table(
    'Daily volume and conversion',
    ['Day', 'Transactions', 'Completed', 'Volume', 'Conversion'],
    dayRows,
    'No transactions in this range.',
  )}
  </details>
</section>
<section aria-labelledby="by-status">
  <h2 id="by-status">By status</h2>
  <ul class="by-status">${byStatus}</ul>
</section>`
  return layout(f, 'overview', 'Overview', body, {
    error,
    head: html`<link rel="stylesheet" href="${f.asset('overview-chart.css')}"><script type="module"
      src="${f.asset('overview-chart.js')}"></script>`,
  })
}
