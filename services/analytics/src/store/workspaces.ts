import { workspaceErasure } from '@mail/event-store';
import type { EventStore } from './connection';

/** Deletes the workspace's events, rollups and suppressions, and records it as closed (@mail/common workspace-erasure). */
export async function eraseWorkspace(store: EventStore, workspaceId: string): Promise<void> {
  for (const statement of workspaceErasure(store.layout, workspaceId)) await store.command(statement);
}
