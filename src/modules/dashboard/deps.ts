import type { Clock } from '../../lib/clock.ts'
import type { KeyService } from '../../keys/key.service.ts'
import type { RateLimiter } from '../../limits/rate-limiter.ts'
import type { RateLimits } from '../../projects/project.service.ts'
import type { SessionService } from '../../users/session.service.ts'
import type { EndpointService } from '../../webhooks/endpoint.service.ts'
import type { WebhookService } from '../../webhooks/webhook.service.ts'
import type { RefundService } from '../refunds/service.ts'
import type { TransactionService } from '../transactions/service.ts'
import type { NativeCoin } from './funds/page.ts'
import type { AssetUrl } from './layout.ts'
import type { DashboardService } from './service.ts'
import type { TokenDecimals } from './amounts.ts'

/** What the dashboard's sections are built from: the services they call and a few facts. */
export interface DashboardDeps {
  sessions: SessionService
  dashboard: DashboardService
  keys: KeyService
  endpoints: EndpointService
  webhooks: WebhookService
  transactions: TransactionService
  refunds: RefundService
  limiter: RateLimiter
  /** Sign-in attempts per client IP. */
  signInLimits: RateLimits
  asset: AssetUrl
  decimals: TokenDecimals
  /** Each network's native coin (the Funds page shows fees in it). */
  native: NativeCoin
  clock: Clock
}
