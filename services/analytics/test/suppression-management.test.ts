import { randomUUID } from 'node:crypto';
import type { analyticsV1 } from '@mail/proto';
import { SuppressionReason, failure, signal, startAnalytics, status, type Analytics, type SignalRow } from './harness';

/** Suppressions by hand, one address's history, the list's filters and its export, the audit of lifts. */

const W = randomUUID();
const OTHER = randomUUID();
const T0 = Date.parse('2026-03-01T00:00:00Z');
const at = (hours: number) => new Date(T0 + hours * 3_600_000).toISOString();
const editor = { userId: randomUUID(), email: 'editor@corp.local' };

let analytics: Analytics;

beforeAll(async () => {
  analytics = await startAnalytics('analytics_suppression_management');
});

afterAll(() => analytics.close());

const signals = (email: string, ...entries: [SignalRow['reason'], string][]) =>
  analytics.insertSignals(entries.map(([reason, occurred_at]) => signal({ workspace_id: W, email, reason, occurred_at })));

const add = (email: string, note?: string, workspaceId = W) => analytics.rpc('addSuppression', { workspaceId, email, note, actor: editor });

const list = async (request: Partial<analyticsV1.ListSuppressionsRequest> = {}) =>
  analytics.rpc('listSuppressions', { workspaceId: W, page: { page: 1, pageSize: 500 }, ...request });

function exported(request: Partial<analyticsV1.ExportSuppressionsRequest> = {}): Promise<analyticsV1.Suppression[]> {
  return new Promise((resolve, reject) => {
    const rows: analyticsV1.Suppression[] = [];
    const stream = analytics.client.exportSuppressions({ workspaceId: W, ...request });
    stream.on('data', (message: analyticsV1.ExportSuppressionsResponse) => rows.push(...message.suppressions));
    stream.on('error', reject);
    stream.on('end', () => resolve(rows));
  });
}

describe('a suppression by hand', () => {
  it('suppresses the address now, with its note, normalized', async () => {
    const before = Date.now();
    const { suppression } = await add(' Manual@Corp.Example ', 'asked by phone');
    expect(suppression).toMatchObject({
      email: 'manual@corp.example',
      reason: SuppressionReason.SUPPRESSION_REASON_MANUAL,
      note: 'asked by phone',
    });
    expect(suppression!.suppressedAt!.getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect((await list({ email: 'manual@corp.example' })).suppressions).toEqual([suppression]);
  });

  it('keeps the reason of an earlier signal', async () => {
    await signals('bounced@example.com', ['hard_bounce', at(1)]);
    const { suppression } = await add('bounced@example.com');
    expect(suppression).toMatchObject({ reason: SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE, suppressedAt: new Date(at(1)) });
  });

  it('is lifted like any other, with who lifted it, and can be added again at once', async () => {
    await add('again@example.com', 'first');
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'again@example.com', actor: editor });
    expect((await list({ email: 'again@example.com' })).suppressions).toEqual([]);
    await add('again@example.com', 'second');
    expect((await list({ email: 'again@example.com' })).suppressions).toMatchObject([
      { reason: SuppressionReason.SUPPRESSION_REASON_MANUAL, note: 'second' },
    ]);
  });

  it('refuses what the API refuses: an invalid address, an over-long note', async () => {
    const refused = await failure(analytics.rpc('addSuppression', { workspaceId: W, email: 'nobody', note: 'n'.repeat(1001) }));
    expect(refused.code).toBe(status.INVALID_ARGUMENT);
    expect((await list({ email: 'nobody' })).suppressions).toEqual([]);
  });
});

describe("one address's history", () => {
  it('shows the state, the signals behind it, the additions and the audit of lifts, newest first', async () => {
    const email = 'history@example.com';
    await signals(email, ['soft_bounce', at(1)], ['soft_bounce', at(2)], ['unsubscribe', at(3)]);
    await analytics.rpc('liftSuppression', { workspaceId: W, email, actor: editor });
    await add(email, 'keep out');
    const answer = await analytics.rpc('getSuppression', { workspaceId: W, email: 'History@Example.com' });
    expect(answer.email).toBe(email);
    expect(answer.suppression).toMatchObject({ email, reason: SuppressionReason.SUPPRESSION_REASON_MANUAL, note: 'keep out' });
    expect(answer.signals.map((entry) => [entry.reason, entry.occurredAt?.toISOString()])).toEqual([
      ['unsubscribe', at(3)],
      ['soft_bounce', at(2)],
      ['soft_bounce', at(1)],
    ]);
    expect(answer.signals[0].providerEventId).not.toBe('');
    expect(answer.additions).toMatchObject([{ note: 'keep out', addedBy: editor }]);
    expect(answer.lifts).toMatchObject([{ liftedBy: editor }]);
    expect(answer.lifts[0].liftedAt!.getTime()).toBeLessThanOrEqual(answer.additions[0].addedAt!.getTime());
  });

  it('of a lifted address says it is not suppressed', async () => {
    await signals('was@example.com', ['spam_report', at(5)]);
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'was@example.com', actor: editor });
    const answer = await analytics.rpc('getSuppression', { workspaceId: W, email: 'was@example.com' });
    expect(answer.suppression).toBeUndefined();
    expect(answer.signals).toMatchObject([{ reason: 'spam_report' }]);
    expect(answer.lifts).toMatchObject([{ liftedBy: editor }]);
  });

  it('is NOT_FOUND for an address never suppressed here, even if it is elsewhere', async () => {
    await signals('twice@example.com', ['soft_bounce', at(1)], ['soft_bounce', at(2)]);
    await add('elsewhere@example.com', undefined, OTHER);
    for (const email of ['twice@example.com', 'never@example.com', 'elsewhere@example.com']) {
      expect((await failure(analytics.rpc('getSuppression', { workspaceId: W, email }))).code).toBe(status.NOT_FOUND);
    }
  });
});

describe('the list', () => {
  beforeAll(async () => {
    await signals('filter-hard@lists.example', ['hard_bounce', at(10)]);
    await signals('filter-unsub@lists.example', ['unsubscribe', at(11)]);
    await add('filter-manual@lists.example');
  });

  it('filters by reason and by a part of the address, together', async () => {
    const manual = await list({ reason: SuppressionReason.SUPPRESSION_REASON_MANUAL });
    expect(manual.suppressions.every((row) => row.reason === SuppressionReason.SUPPRESSION_REASON_MANUAL)).toBe(true);
    expect(manual.suppressions.map((row) => row.email)).toContain('filter-manual@lists.example');
    expect((await list({ query: 'LISTS.example' })).suppressions.map((row) => row.email)).toEqual([
      'filter-manual@lists.example',
      'filter-unsub@lists.example',
      'filter-hard@lists.example',
    ]);
    const both = await list({ query: 'lists', reason: SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE });
    expect([both.suppressions.map((row) => row.email), both.page?.total]).toEqual([['filter-hard@lists.example'], 1]);
    expect((await list({ query: "' OR 1=1 --" })).suppressions).toEqual([]);
  });

  it('is exported whole, in the same order, through the stream', async () => {
    await analytics.insertSignals(
      Array.from({ length: 1200 }, (_, i) =>
        signal({
          workspace_id: W,
          email: `bulk-${String(i).padStart(4, '0')}@bulk.example`,
          reason: 'hard_bounce',
          occurred_at: at(20 + (i % 7)),
        }),
      ),
    );
    const pages: analyticsV1.Suppression[] = [];
    for (let page = 1; ; page++) {
      const answer = await list({ page: { page, pageSize: 500 } });
      pages.push(...answer.suppressions);
      if (answer.suppressions.length < 500) break;
    }
    expect(pages.length).toBeGreaterThan(1200);
    expect(await exported()).toEqual(pages);
    expect(await exported({ query: 'lists', reason: SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE })).toMatchObject([
      { email: 'filter-unsub@lists.example' },
    ]);
  });
});

describe('FilterSuppressed (the delivery service check at hand-over)', () => {
  it('answers which of the addresses are suppressed in the workspace now: signals and additions, not lifted ones', async () => {
    await signals('filter-bounced@example.com', ['hard_bounce', at(2)]);
    await add('filter-manual@example.com');
    await add('filter-lifted@example.com');
    await analytics.rpc('liftSuppression', { workspaceId: W, email: 'filter-lifted@example.com', actor: editor });
    await add('filter-elsewhere@example.com', undefined, OTHER);
    const { emails } = await analytics.rpc('filterSuppressed', {
      workspaceId: W,
      emails: [
        'Filter-Bounced@Example.com',
        'filter-manual@example.com',
        'filter-lifted@example.com',
        'filter-elsewhere@example.com',
        'filter-never@example.com',
      ],
    });
    expect([...emails].sort()).toEqual(['filter-bounced@example.com', 'filter-manual@example.com']);
    // None with a row in the workspace: another workspace's addition does not count.
    const unsuppressed = await analytics.rpc('filterSuppressed', {
      workspaceId: W,
      emails: ['filter-elsewhere@example.com', 'filter-never@example.com'],
    });
    expect(unsuppressed.emails).toEqual([]);
    expect((await analytics.rpc('filterSuppressed', { workspaceId: W, emails: [] })).emails).toEqual([]);
  });
});
