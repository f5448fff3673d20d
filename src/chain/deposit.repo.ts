import { and, asc, eq, sql } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { bare } from '../db/prepared.ts'
import { chainTransfers, depositAddresses, projects, projectXpubs } from '../db/schema.ts'
import type { Mode } from '../projects/mode.ts'

const ph = (name: string) => sql.placeholder(name)

export type XpubRow = typeof projectXpubs.$inferSelect
export type TransferRow = typeof chainTransfers.$inferSelect

/** A deposit address to hand out: derived from `xpub` at `index` for one transaction. */
export interface NewDepositAddress {
  address: string
  transactionId: string
  projectId: string
  mode: Mode
  xpub: string
  index: number
  createdAt: Date
}

/**
 * docs/decisions/0017-deposit-addresses-from-an-xpub.md persistence: each project and mode's xpub
 * and index counter, and the addresses handed out.
 */
export function createDepositRepo(database: Database) {
  const { db } = database

  // Taking an index and storing the address run on every token choice of the pay page: prepared.
  const takeIndex = db
    .update(projectXpubs)
    .set({ nextIndex: sql`${projectXpubs.nextIndex} + 1` })
    .where(and(eq(projectXpubs.projectId, ph('projectId')), eq(projectXpubs.mode, ph('mode'))))
    .returning({
      xpub: projectXpubs.xpub,
      index: sql<number>`${projectXpubs.nextIndex} - 1`.mapWith(Number),
    })
    .prepare('deposit_take_index')

  const insertAddress = db
    .insert(depositAddresses)
    .values({
      address: ph('address'),
      transactionId: ph('transactionId'),
      projectId: ph('projectId'),
      mode: ph('mode'),
      xpub: ph('xpub'),
      derivationIndex: ph('index'),
      createdAt: ph('createdAt'),
    })
    .onConflictDoNothing()
    .returning({ address: depositAddresses.address })
    .prepare('deposit_insert_address')

  const addressOf = db
    .select({ address: depositAddresses.address })
    .from(depositAddresses)
    .where(eq(depositAddresses.transactionId, ph('transactionId')))
    .prepare('deposit_address_of')

  return {
    /**
     * Takes the next child index of the project's xpub for `mode`, never twice; null without an
     * xpub.
     */
    async takeIndex(
      projectId: string,
      mode: Mode,
    ): Promise<{ xpub: string; index: number } | null> {
      const [r] = await takeIndex.execute({ projectId, mode })
      return r ?? null
    },

    /**
     * Stores an address for its transaction; false if the address or the transaction already has
     * one.
     */
    async insertAddress(a: NewDepositAddress): Promise<boolean> {
      const inserted = await insertAddress.execute({ ...a })
      return inserted.length > 0
    },

    /** The deposit address a transaction was given, if any. */
    async addressOf(transactionId: string): Promise<string | null> {
      const [r] = await addressOf.execute({ transactionId })
      return r?.address ?? null
    },

    /**
     * Sets the operator's xpub for a project and mode: a new key starts at index 0, the same key
     * keeps its counter, and either way it is no longer a generated one.
     */
    async setXpub(projectId: string, mode: Mode, xpub: string, at: Date): Promise<void> {
      await db
        .insert(projectXpubs)
        .values({ projectId, mode, xpub, nextIndex: 0, generated: false, updatedAt: at })
        .onConflictDoUpdate({
          target: [projectXpubs.projectId, projectXpubs.mode],
          set: {
            xpub: sql`excluded.${bare(projectXpubs.xpub)}`,
            generated: false,
            updatedAt: sql`excluded.${bare(projectXpubs.updatedAt)}`,
            nextIndex: sql`CASE WHEN ${projectXpubs.xpub} = excluded.${bare(projectXpubs.xpub)} THEN ${projectXpubs.nextIndex} ELSE 0 END`,
          },
        })
    },

    /**
     * Stores a generated test-mode xpub unless the project has one already (set, or generated
     * concurrently).
     */
    async insertGeneratedTestXpub(projectId: string, xpub: string, at: Date): Promise<void> {
      await db
        .insert(projectXpubs)
        .values({ projectId, mode: 'test', xpub, nextIndex: 0, generated: true, updatedAt: at })
        .onConflictDoNothing()
    },

    /** A project's xpubs, test before live. */
    xpubsOf: (projectId: string): Promise<XpubRow[]> =>
      db
        .select()
        .from(projectXpubs)
        .where(eq(projectXpubs.projectId, projectId))
        .orderBy(asc(projectXpubs.mode)),

    /** Every transfer seen to a transaction's deposit address, in the order seen. */
    transfersTo: (transactionId: string): Promise<TransferRow[]> =>
      db
        .select()
        .from(chainTransfers)
        .where(eq(chainTransfers.transactionId, transactionId))
        .orderBy(asc(chainTransfers.id)),

    async projectExists(projectId: string): Promise<boolean> {
      const [r] = await db
        .select({ id: projects.id })
        .from(projects)
        .where(eq(projects.id, projectId))
      return !!r
    },
  }
}

export type DepositRepo = ReturnType<typeof createDepositRepo>
