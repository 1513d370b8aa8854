import type { Knex } from 'knex';
import { QuotaExceededError, withTransaction } from '@mail/common';
import { TEST_SEND_WINDOW_SECONDS, testSendQuota, type RecentTestSend } from '../domain/test-send-quota';

/** The advisory lock class of the test-send quota (the workspace's hash is the second key). */
const QUOTA_LOCK_CLASS = 5_062_001;

/**
 * Takes `addresses` of the workspace's hourly test-send quota (a sliding hour)
 * or throws QuotaExceededError with the wait until they fit. The workspace's
 * advisory lock makes the count and the insert one step across replicas: of two
 * simultaneous test sends only one can take the last slots.
 */
export async function takeTestSendQuota(db: Knex, workspaceId: string, addresses: number, perHour: number): Promise<void> {
  await withTransaction(db, async (connection) => {
    await connection.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [QUOTA_LOCK_CLASS, workspaceId]);
    const window = `interval '${TEST_SEND_WINDOW_SECONDS} seconds'`;
    await connection.query(`DELETE FROM test_sends WHERE workspace_id = $1 AND sent_at <= now() - ${window}`, [workspaceId]);
    const { rows } = await connection.query<RecentTestSend>(
      `SELECT addresses, extract(epoch FROM sent_at + ${window} - now())::float8 AS "leavesInSeconds"
       FROM test_sends WHERE workspace_id = $1 ORDER BY sent_at`,
      [workspaceId],
    );
    const quota = testSendQuota(rows, addresses, perHour);
    if (!quota.fits) {
      throw new QuotaExceededError(
        `Test send quota reached: the workspace may test-send ${perHour} messages an hour, retry in ${quota.retryAfterSeconds} s`,
        quota.retryAfterSeconds,
      );
    }
    await connection.query('INSERT INTO test_sends (workspace_id, addresses) VALUES ($1, $2)', [workspaceId, addresses]);
  });
}
