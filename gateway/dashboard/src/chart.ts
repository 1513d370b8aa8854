import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { SeriesBucket } from './api';
import { formatBucket, formatCount } from './format';
import { CHART_SERIES } from './metrics';

const HEIGHT = 300;
const HOUR = 3600;
const DAY = 24 * HOUR;
/** Tick steps in seconds: whole hours or whole days, never finer than the buckets. */
const STEPS = {
  hour: [HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY],
  day: [DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY],
};
const dayLabel = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** The time-series chart: one line per event count, x in UTC. Redrawn from scratch for each answer. */
export class SeriesChart {
  private plot: uPlot | undefined;
  private readonly resize = new ResizeObserver(() => this.plot?.setSize(this.size()));

  constructor(private readonly container: HTMLElement) {
    this.resize.observe(container);
  }

  draw(series: SeriesBucket[], interval: 'hour' | 'day'): void {
    this.plot?.destroy();
    const data: uPlot.AlignedData = [
      series.map((bucket) => Date.parse(bucket.bucket_start) / 1000),
      ...CHART_SERIES.map((line) => series.map((bucket) => bucket[line.key])),
    ];
    const tickLabel = (seconds: number): string => {
      const date = new Date(seconds * 1000);
      if (interval === 'day' || seconds % DAY === 0) return dayLabel.format(date);
      return date.toISOString().slice(11, 16);
    };
    const options: uPlot.Options = {
      ...this.size(),
      tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), 'Etc/UTC'),
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      axes: [
        { incrs: STEPS[interval], space: 56, values: (_u, ticks) => ticks.map(tickLabel) },
        { values: (_u, ticks) => ticks.map((tick) => (Number.isInteger(tick) ? formatCount(tick) : '')) },
      ],
      series: [
        {
          label: 'UTC',
          value: (_u, seconds) => (seconds == null ? '–' : formatBucket(new Date(seconds * 1000).toISOString(), interval)),
        },
        ...CHART_SERIES.map((line) => ({
          label: line.label,
          stroke: line.color,
          dash: line.dash,
          width: 2,
          points: { show: series.length <= 62 },
          value: (_u: uPlot, value: number | null) => (value == null ? '–' : formatCount(value)),
        })),
      ],
    };
    this.plot = new uPlot(options, data, this.container);
  }

  private size(): { width: number; height: number } {
    return { width: Math.max(320, this.container.clientWidth), height: HEIGHT };
  }
}
