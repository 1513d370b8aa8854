import type { ClickHouseClient } from '@clickhouse/client';
import { refreshSuppressionState } from '@mail/event-store';
import type { SuppressionSignalRow } from '../domain/columns';

/** Keeps suppression_state current for the addresses whose signals ingestion stores. */
export class SuppressionStateStore {
  constructor(private readonly clickhouse: ClickHouseClient) {}

  /**
   * Recomputes the state of the signals' addresses from everything stored
   * for them; run after inserting the signals, so it sees them. Idempotent:
   * a redelivered batch computes the same rows.
   */
  refresh(signals: SuppressionSignalRow[]): Promise<void> {
    const addresses = new Map(
      signals.map((row) => [`${row.workspace_id} ${row.email}`, { workspaceId: row.workspace_id, email: row.email }]),
    );
    return refreshSuppressionState(this.clickhouse, [...addresses.values()]);
  }
}
