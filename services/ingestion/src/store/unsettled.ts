import type { ClickHouseClient } from '@clickhouse/client';

/** A UTC day of one workspace's events. */
export interface WorkspaceDay {
  workspaceId: string;
  /** YYYY-MM-DD. */
  day: string;
}

/** The distinct (workspace, day) pairs of event rows (occurred_at in unix seconds). */
export function workspaceDays(rows: { workspace_id: string; occurred_at: number }[]): WorkspaceDay[] {
  const days = new Map<string, WorkspaceDay>();
  for (const row of rows) {
    const day = new Date(row.occurred_at * 1000).toISOString().slice(0, 10);
    days.set(`${row.workspace_id} ${day}`, { workspaceId: row.workspace_id, day });
  }
  return [...days.values()];
}

/**
 * Writing these events failed, possibly halfway: ClickHouse may have
 * committed engagement_events without the rollups its views feed, and a
 * retry would then skip those events as stored. Their days must be marked
 * unsettled before the retry.
 */
export class EventsWriteError extends Error {
  constructor(
    readonly days: WorkspaceDay[],
    cause: unknown,
  ) {
    super(`writing events failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** Records days whose rollups may disagree with engagement_events; readers count those days from the events. */
export class UnsettledDays {
  constructor(private readonly clickhouse: ClickHouseClient) {}

  async mark(days: WorkspaceDay[]): Promise<void> {
    if (days.length === 0) return;
    const markedAt = Math.floor(Date.now() / 1000);
    await this.clickhouse.insert({
      table: 'unsettled_days',
      values: days.map(({ workspaceId, day }) => ({ workspace_id: workspaceId, day, marked_at: markedAt })),
      format: 'JSONEachRow',
    });
  }
}
