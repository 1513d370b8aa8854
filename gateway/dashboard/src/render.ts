import type { CampaignStats, LinkStats, SeriesBucket, Stats } from './api';
import { formatBucket, formatCount } from './format';
import { METRICS } from './metrics';

/** DOM building with text nodes only: nothing from the API is ever parsed as HTML. */
function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  ...children: Array<Node | string>
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

function testId(text: string): string {
  return text.replace(/_/g, '-');
}

function emptyRow(columns: number, text: string): HTMLTableRowElement {
  return el('tr', {}, el('td', { colspan: String(columns), class: 'empty' }, text));
}

export function renderTotals(container: HTMLElement, totals: Stats['totals']): void {
  container.replaceChildren(
    ...METRICS.map((metric) =>
      el(
        'div',
        { class: 'card', 'data-testid': `total-${testId(metric.key)}` },
        el('dt', {}, metric.label),
        el('dd', { 'data-testid': `total-${testId(metric.key)}-value` }, metric.format(totals[metric.key])),
      ),
    ),
  );
}

function header(first: string): HTMLTableSectionElement {
  return el(
    'thead',
    {},
    el('tr', {}, el('th', { scope: 'col' }, first), ...METRICS.map((m) => el('th', { scope: 'col', class: 'num' }, m.label))),
  );
}

export function renderCampaigns(table: HTMLTableElement, rows: CampaignStats[], names: ReadonlyMap<string, string>): void {
  table.tHead!.replaceWith(header('Campaign'));
  table.tBodies[0].replaceChildren(
    ...(rows.length === 0
      ? [emptyRow(METRICS.length + 1, 'No events for these filters.')]
      : rows.map((row) =>
          el(
            'tr',
            { 'data-campaign-id': row.campaign_id },
            el('th', { scope: 'row', title: row.campaign_id }, campaignName(row.campaign_id, names)),
            ...METRICS.map((m) => el('td', { class: 'num', 'data-metric': m.key }, m.format(row[m.key]))),
          ),
        )),
  );
}

export function renderSeriesTable(table: HTMLTableElement, series: SeriesBucket[], interval: 'hour' | 'day'): void {
  table.tHead!.replaceWith(header(interval === 'day' ? 'Day (UTC)' : 'Hour (UTC)'));
  table.tBodies[0].replaceChildren(
    ...(series.length === 0
      ? [emptyRow(METRICS.length + 1, 'No events for these filters.')]
      : series.map((bucket) =>
          el(
            'tr',
            {},
            el('th', { scope: 'row' }, formatBucket(bucket.bucket_start, interval)),
            ...METRICS.map((m) => el('td', { class: 'num' }, m.format(bucket[m.key]))),
          ),
        )),
  );
}

export function renderSuppressions(table: HTMLTableElement, stats: Stats): void {
  const rows: Array<[string, string, number, boolean]> = [
    ['bounces-hard', 'Hard bounces (events in range)', stats.totals.hard_bounces, false],
    ['bounces-soft', 'Soft bounces (events in range)', stats.totals.soft_bounces, false],
    ['suppressions-total', 'Addresses suppressed in range', stats.suppressions.total, false],
    ['suppressions-hard-bounce', 'by hard bounce', stats.suppressions.hard_bounce, true],
    ['suppressions-soft-bounces', 'by soft bounces (3 in 30 days)', stats.suppressions.soft_bounces, true],
    ['suppressions-unsubscribe', 'by unsubscribe', stats.suppressions.unsubscribe, true],
    ['suppressions-spam-report', 'by spam report', stats.suppressions.spam_report, true],
  ];
  table.tBodies[0].replaceChildren(
    ...rows.map(([id, label, value, nested]) =>
      el(
        'tr',
        nested ? { class: 'nested' } : {},
        el('th', { scope: 'row' }, label),
        el('td', { class: 'num', 'data-testid': id }, formatCount(value)),
      ),
    ),
  );
}

export function renderLinks(table: HTMLTableElement, links: LinkStats[], names: ReadonlyMap<string, string>): void {
  table.tHead!.replaceWith(
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        el('th', { scope: 'col' }, 'Link'),
        el('th', { scope: 'col' }, 'Campaign'),
        el('th', { scope: 'col', class: 'num' }, 'Clicks'),
        el('th', { scope: 'col', class: 'num' }, 'Unique clicks'),
      ),
    ),
  );
  table.tBodies[0].replaceChildren(
    ...(links.length === 0
      ? [emptyRow(4, 'No clicks for these filters.')]
      : links.map((link) =>
          el(
            'tr',
            {},
            el('th', { scope: 'row', class: 'url' }, linkTo(link.url)),
            el('td', { title: link.campaign_id }, campaignName(link.campaign_id, names)),
            el('td', { class: 'num' }, formatCount(link.clicks)),
            el('td', { class: 'num' }, formatCount(link.unique_clicks)),
          ),
        )),
  );
}

function campaignName(id: string, names: ReadonlyMap<string, string>): string {
  return names.get(id) ?? `Unknown campaign ${id.slice(0, 8)}…`;
}

/** Only http(s) addresses become links; anything else (javascript:, data:) stays text. */
function linkTo(url: string): Node {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) return document.createTextNode(url);
  return el('a', { href: parsed.href, target: '_blank', rel: 'noopener noreferrer' }, url);
}
