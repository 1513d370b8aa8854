import type { ClickHouseClient } from '@clickhouse/client';

/** A UTC day of one workspace's events. */
export interface WorkspaceDay {
  workspaceId: string;
  /** YYYY-MM-DD. */
  day: string;
}

/** The distinct (workspace, day) pairs of event rows (occurred_at in unix seconds). */
export function workspaceDays(rows: { workspace_id: string; occurred_at: number }[]): WorkspaceDay[] {
  // Day numbers first, rather than a date formatted per row (bench/README.md, "Ingestion: building TabSeparated rows").
  const dayNumbers = new Map<string, Set<number>>();
  for (const row of rows) {
    const day = Math.floor(row.occurred_at / 86_400);
    const days = dayNumbers.get(row.workspace_id);
    if (days) days.add(day);
    else dayNumbers.set(row.workspace_id, new Set([day]));
  }
  return [...dayNumbers].flatMap(([workspaceId, days]) =>
    [...days].map((day) => ({ workspaceId, day: new Date(day * 86_400_000).toISOString().slice(0, 10) })),
  );
}

/** Records days whose rollups may disagree with the events table; readers count those days from the events. */
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
