/**
 * The overview's chart: daily volume (bars) and conversion (line), drawn with uPlot from the
 * numbers the page embeds (#chart-data). Served from this server; no CDN.
 */
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'

interface Day {
  date: string
  total_transactions: number
  completed_transactions: number
  total_volume_usd: number
  conversion_rate: number
}

const holder = document.getElementById('chart')
const source = document.getElementById('chart-data')
if (holder && source) {
  const days = JSON.parse(source.textContent ?? '[]') as Day[]
  const x = days.map((d) => Date.parse(`${d.date}T00:00:00Z`) / 1000)
  const usd = new Intl.NumberFormat('en-US', {
    style: 'currency',
    currency: 'USD',
    maximumFractionDigits: 0,
  })
  const size = () => ({
    width: Math.max(280, holder.clientWidth),
    height: holder.clientWidth < 500 ? 220 : 300,
  })
  const chart = new uPlot(
    {
      ...size(),
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      legend: { live: false },
      // Half a day either side, so the first and last days' bars are whole.
      scales: {
        x: { time: true, range: (_u, min, max) => [min - 43_200, max + 43_200] },
        usd: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] },
        pct: { range: [0, 100] },
      },
      axes: [
        {},
        { scale: 'usd', values: (_u, ticks) => ticks.map((t) => usd.format(t)), size: 70 },
        {
          scale: 'pct',
          side: 1,
          values: (_u, ticks) => ticks.map((t) => `${t}%`),
          grid: { show: false },
        },
      ],
      series: [
        {
          label: 'Day',
          value: (_u, ts) => (ts == null ? '' : new Date(ts * 1000).toISOString().slice(0, 10)),
        },
        {
          label: 'Volume',
          scale: 'usd',
          stroke: '#1a4fd6',
          fill: 'rgba(26,79,214,0.35)',
          paths: uPlot.paths.bars!({ size: [0.7, 40] }),
          points: { show: false },
          value: (_u, v) => (v == null ? '' : usd.format(v)),
        },
        {
          label: 'Conversion',
          scale: 'pct',
          stroke: '#116b3a',
          width: 2,
          value: (_u, v) => (v == null ? '' : `${v}%`),
        },
      ],
    },
    [
      x,
      days.map((d) => d.total_volume_usd || null),
      days.map((d) => (d.total_transactions ? d.conversion_rate : null)),
    ],
    holder,
  )
  new ResizeObserver(() => chart.setSize(size())).observe(holder)
}
