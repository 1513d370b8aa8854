import type { CampaignStats, EngagementCounts, LinkStats, SeriesBucket, Stats, VariantStats } from './api';
import { formatBucket, formatCount, formatOpens, formatRate } from './format';
import { METRICS, TABLE_METRICS, VARIANT_METRICS, type Metric } from './metrics';

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

function header(first: string, metrics: readonly Metric[] = TABLE_METRICS, ...more: string[]): HTMLTableSectionElement {
  return el(
    'thead',
    {},
    el(
      'tr',
      {},
      el('th', { scope: 'col' }, first),
      ...more.map((label) => el('th', { scope: 'col' }, label)),
      ...metrics.map((m) => el('th', { scope: 'col', class: 'num' }, m.label)),
    ),
  );
}

function metricCells(counts: EngagementCounts, metrics: readonly Metric[] = TABLE_METRICS): HTMLTableCellElement[] {
  return metrics.map((m) => el('td', { class: 'num', 'data-metric': m.key }, m.format(counts[m.key])));
}

/**
 * The funnel of the chosen range and campaign: sent (by our own sender) ->
 * processed (by the provider) -> delivered -> unique opens -> unique clicks,
 * each step with its rate, and the opens with their machine share beside the
 * unique opens.
 */
export function renderFunnel(container: HTMLElement, totals: EngagementCounts): void {
  const step = (id: string, label: string, value: number, ...notes: Array<[string, string]>) =>
    el(
      'li',
      { class: 'step', 'data-testid': `funnel-${id}` },
      el('span', { class: 'step-label' }, label),
      el('strong', { 'data-testid': `funnel-${id}-value` }, formatCount(value)),
      ...notes.map(([noteId, text]) => el('span', { class: 'step-note', 'data-testid': `funnel-${noteId}` }, text)),
    );
  container.replaceChildren(
    step('sent', 'Sent', totals.sent),
    step('processed', 'Processed', totals.processed),
    step('delivered', 'Delivered', totals.delivered, ['delivery-rate', `${formatRate(totals.delivery_rate)} delivery rate`]),
    step(
      'unique-opens',
      'Unique opens',
      totals.unique_opens,
      ['open-rate', `${formatRate(totals.open_rate)} open rate`],
      ['opens', formatOpens(totals.opens, totals.machine_opens)],
    ),
    step(
      'unique-clicks',
      'Unique clicks',
      totals.unique_clicks,
      ['click-rate', `${formatRate(totals.click_rate)} click rate`],
      ['click-to-open-rate', `${formatRate(totals.click_to_open_rate)} click-to-open`],
    ),
  );
}

export function renderCampaigns(table: HTMLTableElement, rows: CampaignStats[], names: ReadonlyMap<string, string>): void {
  table.tHead!.replaceWith(header('Campaign'));
  table.tBodies[0].replaceChildren(
    ...(rows.length === 0
      ? [emptyRow(TABLE_METRICS.length + 1, 'No events for these filters.')]
      : rows.map((row) =>
          el(
            'tr',
            { 'data-campaign-id': row.campaign_id },
            el('th', { scope: 'row', title: row.campaign_id }, campaignName(row.campaign_id, names)),
            ...metricCells(row),
          ),
        )),
  );
}

export function renderSeriesTable(table: HTMLTableElement, series: SeriesBucket[], interval: 'hour' | 'day'): void {
  table.tHead!.replaceWith(header(interval === 'day' ? 'Day (UTC)' : 'Hour (UTC)'));
  table.tBodies[0].replaceChildren(
    ...(series.length === 0
      ? [emptyRow(TABLE_METRICS.length + 1, 'No events for these filters.')]
      : series.map((bucket) =>
          el('tr', {}, el('th', { scope: 'row' }, formatBucket(bucket.bucket_start, interval)), ...metricCells(bucket)),
        )),
  );
}

const variantName = (variant: VariantStats): string => variant.label ?? `Variant ${variant.variant_id.slice(0, 8)}…`;

/** The verdict on one rate: the leader's name, or that no variant leads at 95 % confidence. */
function verdict(id: string, rate: string, leader: VariantStats | undefined): HTMLParagraphElement {
  return el(
    'p',
    { class: leader ? 'verdict leader' : 'verdict', 'data-testid': id, 'data-leader': leader?.variant_id ?? '' },
    leader ? `Leader by ${rate}: ${variantName(leader)} (95 % confidence)` : `By ${rate}: no significant difference yet`,
  );
}

/**
 * The A/B panel: for each campaign with variants, every variant's figures,
 * the leaders marked, and the verdict on open and click rate. Hidden when no
 * campaign in the answer has variants.
 */
export function renderVariants(section: HTMLElement, container: HTMLElement, stats: Stats, names: ReadonlyMap<string, string>): void {
  const withVariants = stats.campaigns.filter((campaign) => stats.variants.some((variant) => variant.campaign_id === campaign.campaign_id));
  section.hidden = withVariants.length === 0;
  container.replaceChildren(
    ...withVariants.map((campaign) => {
      const variants = stats.variants.filter((variant) => variant.campaign_id === campaign.campaign_id);
      const byId = (id: string | null) => variants.find((variant) => variant.variant_id === id);
      const marks = (variant: VariantStats) =>
        [
          variant.variant_id === campaign.leader_by_open_rate ? 'open rate' : undefined,
          variant.variant_id === campaign.leader_by_click_rate ? 'click rate' : undefined,
        ].filter((mark): mark is string => mark !== undefined);
      return el(
        'div',
        { class: 'variants', 'data-testid': 'variants-campaign', 'data-campaign-id': campaign.campaign_id },
        el('h3', { title: campaign.campaign_id }, campaignName(campaign.campaign_id, names)),
        verdict('verdict-open-rate', 'open rate', byId(campaign.leader_by_open_rate)),
        verdict('verdict-click-rate', 'click rate', byId(campaign.leader_by_click_rate)),
        el(
          'div',
          { class: 'scroll' },
          el(
            'table',
            { 'data-testid': 'variants-table' },
            header('Variant', VARIANT_METRICS, 'Weight', 'Active', 'Leads on'),
            el(
              'tbody',
              {},
              ...variants.map((variant) =>
                el(
                  'tr',
                  { 'data-variant-id': variant.variant_id, class: marks(variant).length > 0 ? 'leader' : '' },
                  el('th', { scope: 'row', title: variant.variant_id }, variantName(variant)),
                  el('td', { 'data-field': 'weight' }, variant.weight === null ? '–' : String(variant.weight)),
                  el('td', { 'data-field': 'is_active' }, variant.is_active ? 'yes' : 'no'),
                  el('td', { 'data-field': 'leads' }, marks(variant).join(', ')),
                  ...metricCells(variant, VARIANT_METRICS),
                ),
              ),
            ),
          ),
        ),
      );
    }),
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
export function linkTo(url: string): Node {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) return document.createTextNode(url);
  return el('a', { href: parsed.href, target: '_blank', rel: 'noopener noreferrer' }, url);
}
