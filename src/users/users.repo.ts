import { asc, eq, lt, or, sql } from 'drizzle-orm'
import type { Database } from '../db/client.ts'
import { dashboardSessions, projectMembers, projects, users } from '../db/schema.ts'

export type UserRow = typeof users.$inferSelect
export type SessionRow = typeof dashboardSessions.$inferSelect

/**
 * Dashboard users: their accounts, sign-in state, sessions and memberships; the rules are in
 * user.service.ts (accounts) and session.service.ts (sign-in).
 */
export function createUsersRepo(database: Pick<Database, 'db'>) {
  const { db } = database

  return {
    async projectExists(id: string): Promise<boolean> {
      const [row] = await db.select({ id: projects.id }).from(projects).where(eq(projects.id, id))
      return row !== undefined
    },

    async insertUser(user: { id: string; email: string; passwordHash: string }): Promise<void> {
      await db.insert(users).values(user)
    },

    /** Makes the user a member of the project (already one: nothing changes). */
    async addMember(userId: string, projectId: string): Promise<void> {
      await db.insert(projectMembers).values({ userId, projectId }).onConflictDoNothing()
    },

    async userByEmail(email: string): Promise<UserRow | undefined> {
      const [user] = await db.select().from(users).where(eq(users.email, email))
      return user
    },

    async userById(id: string): Promise<UserRow | undefined> {
      const [user] = await db.select().from(users).where(eq(users.id, id))
      return user
    },

    /** A right password: wrong ones no longer count, and the account is unlocked. */
    async clearFailedSignIns(userId: string): Promise<void> {
      await db
        .update(users)
        .set({ failedSignIns: 0, lockedUntil: null })
        .where(eq(users.id, userId))
    },

    /**
     * Counts a wrong password; the `threshold`-th in a row locks the account until `lockUntil`
     * and starts the count again. One statement, so concurrent guesses cannot skip the lock.
     */
    async countFailedSignIn(userId: string, threshold: number, lockUntil: Date): Promise<void> {
      await db
        .update(users)
        .set({
          failedSignIns: sql`CASE WHEN ${users.failedSignIns} + 1 >= ${threshold} THEN 0 ELSE ${users.failedSignIns} + 1 END`,
          lockedUntil: sql`CASE WHEN ${users.failedSignIns} + 1 >= ${threshold} THEN ${lockUntil.toISOString()}::timestamptz ELSE ${users.lockedUntil} END`,
        })
        .where(eq(users.id, userId))
    },

    async insertSession(s: SessionRow): Promise<void> {
      await db.insert(dashboardSessions).values(s)
    },

    /** Deletes the sessions past their absolute end or idle since before `idleSince`. */
    async deleteExpiredSessions(at: Date, idleSince: Date): Promise<void> {
      await db
        .delete(dashboardSessions)
        .where(or(lt(dashboardSessions.expiresAt, at), lt(dashboardSessions.lastSeenAt, idleSince)))
    },

    /** A session with its user's e-mail address. */
    async sessionByTokenHash(
      tokenHash: string,
    ): Promise<{ s: SessionRow; email: string } | undefined> {
      const [row] = await db
        .select({ s: dashboardSessions, email: users.email })
        .from(dashboardSessions)
        .innerJoin(users, eq(users.id, dashboardSessions.userId))
        .where(eq(dashboardSessions.tokenHash, tokenHash))
      return row
    },

    async touchSession(tokenHash: string, at: Date): Promise<void> {
      await db
        .update(dashboardSessions)
        .set({ lastSeenAt: at })
        .where(eq(dashboardSessions.tokenHash, tokenHash))
    },

    async deleteSession(tokenHash: string): Promise<void> {
      await db.delete(dashboardSessions).where(eq(dashboardSessions.tokenHash, tokenHash))
    },

    /** The projects a user belongs to, by name. */
    projectsOf: (
      userId: string,
    ): Promise<{ id: string; name: string; status: 'active' | 'inactive' }[]> =>
      db
        .select({ id: projects.id, name: projects.name, status: projects.status })
        .from(projectMembers)
        .innerJoin(projects, eq(projects.id, projectMembers.projectId))
        .where(eq(projectMembers.userId, userId))
        .orderBy(asc(projects.name), asc(projects.id)),
  }
}

export type UsersRepo = ReturnType<typeof createUsersRepo>
