import crypto from 'node:crypto';
import { uniqueSuffix, type Stack } from '@mail/local';
import { startPrivateStack } from '../support/private-stack';

/**
 * The whole real stack for the hostile-input tests, isolated
 * (startPrivateStack: the webhook is open, so junk reaches Kafka), with a
 * workspace. No webhook authentication unless the caller's environment sets
 * it, so every operation can be reached.
 */
export interface HostileStack {
  stack: Stack;
  gateway: string;
  /** A workspace that exists, for the `workspace_id` header. */
  workspaceId: string;
  close(): Promise<void>;
}

export async function startHostileStack(label: string): Promise<HostileStack> {
  const isolated = await startPrivateStack(label, { env: { LOG_LEVEL: 'warn' } });
  const { stack } = isolated;
  const close = (): Promise<void> => isolated.close();
  try {
    const gateway = stack.urls.gateway;
    // Creating a workspace is platform_admin's (the dev user); the header only has to be a UUID here.
    const response = await fetch(`${gateway}/workspaces/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', workspace_id: crypto.randomUUID() },
      body: JSON.stringify({ name: `${label} ${uniqueSuffix()}` }),
    });
    const body = (await response.json()) as { id?: string };
    if (response.status !== 201 || !body.id) throw new Error(`creating a workspace: ${response.status} ${JSON.stringify(body)}`);
    return { stack, gateway, workspaceId: body.id, close };
  } catch (error) {
    await close();
    throw error;
  }
}
