import type * as grpc from '@grpc/grpc-js';
import { Client } from 'pg';
import type { campaignV1 } from '@mail/proto';
import { WORKSPACE_A, WORKSPACE_B, failure, startCampaignService, status, type CampaignService } from './harness';

let service: CampaignService;

beforeAll(async () => {
  service = await startCampaignService();
});

afterAll(async () => {
  await service.close();
});

/** An open WatchCategoryChanges stream collecting what it receives. */
interface Watch {
  received: string[];
  /** Resolves with the status the stream ended with. */
  ended: Promise<grpc.StatusObject>;
  until(count: number): Promise<string[]>;
  cancel(): void;
}

/**
 * Opens a stream and waits for its response headers: from then on the
 * subscription is live. While the feed (re)connects the service answers
 * UNAVAILABLE; like a real subscriber, try again.
 */
async function watch(): Promise<Watch> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await openWatch();
    } catch (error) {
      if ((error as grpc.ServiceError).code !== status.UNAVAILABLE || attempt === 200) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function openWatch(): Promise<Watch> {
  const stream = service.client.watchCategoryChanges({});
  const received: string[] = [];
  const waiters: (() => void)[] = [];
  stream.on('data', (message: campaignV1.WatchCategoryChangesResponse) => {
    received.push(...message.providerCategoryIds);
    waiters.splice(0).forEach((wake) => wake());
  });
  const ended = new Promise<grpc.StatusObject>((resolve) => stream.on('status', resolve));
  stream.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    stream.once('metadata', () => resolve());
    stream.once('error', reject);
  });
  const until = async (count: number): Promise<string[]> => {
    while (received.length < count) await new Promise<void>((wake) => waiters.push(wake));
    return received;
  };
  return { received, ended, until, cancel: () => stream.cancel() };
}

function create(workspaceId: string, providerCategoryId?: string) {
  return service.rpc('createCampaign', {
    workspaceId,
    campaign: { workspaceId, name: 'Categorized', providerCategoryId, recipientSource: 0, deliveryMode: 0 },
  });
}

function setCategory(id: string, providerCategoryId: string | undefined) {
  return service.rpc('updateCampaign', {
    workspaceId: WORKSPACE_A,
    id,
    updateMask: ['provider_category_id'],
    campaign: { workspaceId: '', providerCategoryId, recipientSource: 0, deliveryMode: 0 },
  });
}

/** The backend pid of the feed's LISTEN connection, as Postgres sees it. */
async function listenerPid(admin: Client): Promise<number | undefined> {
  const { rows } = await admin.query(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()",
  );
  return rows[0]?.pid;
}

it('streams every committed change of a category id to every subscriber', async () => {
  const [first, second] = [await watch(), await watch()];
  const { campaign } = await create(WORKSPACE_A, 'cat-created');
  await create(WORKSPACE_A);
  await setCategory(campaign!.id, 'cat-renamed');
  await service.rpc('updateCampaign', {
    workspaceId: WORKSPACE_A,
    id: campaign!.id,
    updateMask: ['name'],
    campaign: { workspaceId: '', name: 'No category change', recipientSource: 0, deliveryMode: 0 },
  });
  await setCategory(campaign!.id, undefined);
  const other = await create(WORKSPACE_B, 'cat-deleted');
  await service.rpc('deleteCampaign', { workspaceId: WORKSPACE_B, id: other.campaign!.id });

  const expected = ['cat-created', 'cat-created', 'cat-renamed', 'cat-renamed', 'cat-deleted', 'cat-deleted'];
  expect((await first.until(6)).slice().sort()).toEqual(expected.slice().sort());
  expect(await second.until(6)).toEqual(first.received);
  first.cancel();
  second.cancel();
});

it('announces the category of a campaign whose variants change, which its resolution lists', async () => {
  const subscriber = await watch();
  const { campaign } = await create(WORKSPACE_A, 'cat-variants');
  expect(await subscriber.until(1)).toEqual(['cat-variants']);
  await service.rpc('updateCampaign', {
    workspaceId: WORKSPACE_A,
    id: campaign!.id,
    updateMask: ['variants'],
    campaign: { workspaceId: '', variants: { variants: [{ templateId: 'b' }] }, recipientSource: 0, deliveryMode: 0 },
  });
  expect(await subscriber.until(2)).toEqual(['cat-variants', 'cat-variants']);
  subscriber.cancel();
});

it('announces nothing for a write that rolls back', async () => {
  // A committed write's announcement can reach the feed after the write has answered: subscribe only once it
  // has gone out, so that nothing but what follows can reach the subscriber.
  const earlier = await watch();
  await create(WORKSPACE_A, 'cat-taken');
  expect(await earlier.until(1)).toEqual(['cat-taken']);
  earlier.cancel();
  const subscriber = await watch();
  expect(await failure(create(WORKSPACE_B, 'cat-taken'))).toMatchObject({ code: status.ALREADY_EXISTS });
  await create(WORKSPACE_A, 'cat-after');
  expect(await subscriber.until(1)).toEqual(['cat-after']);
  subscriber.cancel();
});

it('ends every stream when the LISTEN connection is lost, then listens again', async () => {
  const admin = new Client({ connectionString: service.postgres.url });
  await admin.connect();
  try {
    const subscriber = await watch();
    const pid = await listenerPid(admin);
    expect(pid).toEqual(expect.any(Number));
    await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    expect(await subscriber.ended).toMatchObject({ code: status.UNAVAILABLE });

    const again = await watch();
    expect(await listenerPid(admin)).not.toBe(pid);
    await create(WORKSPACE_A, 'cat-after-reconnect');
    expect(await again.until(1)).toEqual(['cat-after-reconnect']);
    again.cancel();
  } finally {
    await admin.end();
  }
});
