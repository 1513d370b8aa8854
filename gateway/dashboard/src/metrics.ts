import type { CountKey, EngagementCounts, RateKey } from './api';
import { formatCount, formatRate } from './format';

export interface Metric {
  key: keyof EngagementCounts;
  label: string;
  /** Counts are never null; rates are when their denominator is 0. */
  format: (value: number | null) => string;
}

const count = (key: CountKey, label: string): Metric => ({ key, label, format: (value) => formatCount(value ?? 0) });
const rate = (key: RateKey, label: string): Metric => ({ key, label, format: formatRate });

/** Every figure of EngagementCounts, in the order the totals show them. */
export const METRICS: readonly Metric[] = [
  count('sent', 'Sent'),
  count('processed', 'Processed'),
  count('delivered', 'Delivered'),
  rate('delivery_rate', 'Delivery rate'),
  count('deferred', 'Deferred'),
  count('dropped', 'Dropped'),
  count('opens', 'Opens'),
  count('machine_opens', 'Machine opens'),
  count('unique_opens', 'Unique opens'),
  rate('open_rate', 'Open rate'),
  count('clicks', 'Clicks'),
  count('unique_clicks', 'Unique clicks'),
  rate('click_rate', 'Click rate'),
  rate('click_to_open_rate', 'Click-to-open rate'),
  count('hard_bounces', 'Hard bounces'),
  count('soft_bounces', 'Soft bounces'),
  rate('bounce_rate', 'Bounce rate'),
  count('unsubscribes', 'Unsubscribes'),
  rate('unsubscribe_rate', 'Unsubscribe rate'),
  count('spam_reports', 'Spam reports'),
  rate('spam_report_rate', 'Spam report rate'),
];

/** The metrics of these keys, in the order of METRICS. */
const metricsOf = (...keys: Array<keyof EngagementCounts>): readonly Metric[] => METRICS.filter((metric) => keys.includes(metric.key));

/** The columns of the per-campaign, per-bucket and per-variant tables: the funnel and what goes wrong. */
export const TABLE_METRICS = metricsOf(
  'sent',
  'processed',
  'delivered',
  'delivery_rate',
  'opens',
  'unique_opens',
  'open_rate',
  'unique_clicks',
  'click_rate',
  'click_to_open_rate',
  'bounce_rate',
  'unsubscribe_rate',
  'spam_report_rate',
);

/** The columns of the variants panel: what an A/B test compares. */
export const VARIANT_METRICS = metricsOf(
  'delivered',
  'opens',
  'machine_opens',
  'unique_opens',
  'open_rate',
  'unique_clicks',
  'click_rate',
  'click_to_open_rate',
);

/**
 * The event counts drawn as lines, each with its colour (a rate has no place
 * on a count axis). Unique counts are dashed: they often equal their total and
 * would hide it.
 */
export const CHART_SERIES: ReadonlyArray<{ key: CountKey; label: string; color: string; dash?: number[] }> = [
  { key: 'delivered', label: 'Delivered', color: '#64748b' },
  { key: 'opens', label: 'Opens', color: '#2563eb' },
  { key: 'unique_opens', label: 'Unique opens', color: '#60a5fa', dash: [6, 4] },
  { key: 'clicks', label: 'Clicks', color: '#059669' },
  { key: 'unique_clicks', label: 'Unique clicks', color: '#34d399', dash: [6, 4] },
  { key: 'hard_bounces', label: 'Hard bounces', color: '#dc2626' },
  { key: 'soft_bounces', label: 'Soft bounces', color: '#f59e0b' },
  { key: 'unsubscribes', label: 'Unsubscribes', color: '#7c3aed' },
];
