-- Rate-limit counters (docs/decisions/0023-rate-limits-exact.md) are fixed windows of a minute to a day: losing them in a crash only resets the
-- windows, while writing them to the WAL cost a flush on every grant. UNLOGGED keeps them
-- transactional (and exact across instances) without the WAL.
ALTER TABLE "rate_limits" SET UNLOGGED;
