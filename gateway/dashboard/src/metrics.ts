import type { EngagementCounts } from './api';
import { formatCount, formatRate } from './format';

export type CountKey = Exclude<keyof EngagementCounts, 'click_to_open_rate'>;

export interface Metric {
  key: keyof EngagementCounts;
  label: string;
  format: (value: number) => string;
}

/** The columns of EngagementCounts, in the order the page shows them. */
export const METRICS: readonly Metric[] = [
  { key: 'opens', label: 'Opens', format: formatCount },
  { key: 'unique_opens', label: 'Unique opens', format: formatCount },
  { key: 'clicks', label: 'Clicks', format: formatCount },
  { key: 'unique_clicks', label: 'Unique clicks', format: formatCount },
  { key: 'click_to_open_rate', label: 'Click-to-open rate', format: formatRate },
  { key: 'hard_bounces', label: 'Hard bounces', format: formatCount },
  { key: 'soft_bounces', label: 'Soft bounces', format: formatCount },
  { key: 'unsubscribes', label: 'Unsubscribes', format: formatCount },
];

/** The event counts drawn as lines, each with its colour (a rate has no place on a count axis). */
/** Unique counts are dashed: they often equal their total and would hide it. */
export const CHART_SERIES: ReadonlyArray<{ key: CountKey; label: string; color: string; dash?: number[] }> = [
  { key: 'opens', label: 'Opens', color: '#2563eb' },
  { key: 'unique_opens', label: 'Unique opens', color: '#60a5fa', dash: [6, 4] },
  { key: 'clicks', label: 'Clicks', color: '#059669' },
  { key: 'unique_clicks', label: 'Unique clicks', color: '#34d399', dash: [6, 4] },
  { key: 'hard_bounces', label: 'Hard bounces', color: '#dc2626' },
  { key: 'soft_bounces', label: 'Soft bounces', color: '#f59e0b' },
  { key: 'unsubscribes', label: 'Unsubscribes', color: '#7c3aed' },
];
