import { workspaceErasure } from '@mail/event-store';
import type { EventStore } from './connection';

/**
 * Deletes the workspace's events, rollups and suppressions, and records it as
 * closed (@mail/event-store workspace-erasure): the record first, then the
 * deletions at once (in a cluster each waits for every server's DDL queue,
 * which takes them one after the other; sent in turn, they would outlast the
 * caller's deadline).
 */
export async function eraseWorkspace(store: EventStore, workspaceId: string): Promise<void> {
  const [record, ...deletions] = workspaceErasure(store.layout, workspaceId);
  await store.command(record);
  await Promise.all(deletions.map((statement) => store.command(statement)));
}
