import type { CampaignRun, EngagementCounts, EngagementEvent, LinkStats, Page, Stats } from './api';
import { el } from './dom';
import { formatCount, formatRate } from './format';
import { linkTo } from './render';
import type { ViewContext } from './suppressions';

/**
 * First-party tracking and bounces on the Campaign runs page (docs/api.md,
 * "First-party tracking", "Event attribution to runs"): the chosen campaign's
 * `track_opens` and `track_clicks` switches, and for the selected run its opens
 * and clicks by people and by machines, its most clicked links and its bounces
 * by class. `data-status` (idle | loading | ready | error) on each part tells
 * tests what is on screen.
 */

/** The campaign record's fields the switches read. */
interface CampaignTrackingFields {
  id: string;
  track_opens: boolean;
  track_clicks: boolean;
}

/** The statistics' totals carry machine clicks too (events.yaml), which the Statistics page does not show. */
type RunStats = Stats & { totals: EngagementCounts & { machine_clicks: number } };

type BounceClass =
  'invalid_address' | 'mailbox_unavailable' | 'technical' | 'content' | 'reputation' | 'frequency_or_volume' | 'unclassified';

type BounceEvent = EngagementEvent & { bounce_class: BounceClass | null };

const BOUNCE_CLASSES: Record<BounceClass, string> = {
  invalid_address: 'Invalid address',
  mailbox_unavailable: 'Mailbox unavailable',
  technical: 'Technical',
  content: 'Content',
  reputation: 'Reputation',
  frequency_or_volume: 'Frequency or volume',
  unclassified: 'Unclassified',
};

/** The API's largest page: the bounces counted by class are the newest this many. */
const BOUNCES_READ = 500;
/** A run shown again (the runs are re-read every second while one sends) reads its figures again after this long. */
const REFRESH_MS = 15_000;
/** A run's events answer its messages, so none is older than the run; the hour allows for providers' clocks. */
const CLOCK_SLACK_MS = 3_600_000;

const campaignPath = (id: string): string => `/email-campaigns/${encodeURIComponent(id)}`;

function showError(part: HTMLElement, line: HTMLElement, error: unknown): void {
  line.textContent = error instanceof Error ? error.message : String(error);
  line.hidden = false;
  part.dataset.status = 'error';
}

/** `count` over `of` as a rate, or "–" when `of` is 0. */
const share = (count: number, of: number): string => (of === 0 ? '–' : formatRate(count / of));

/** The chosen campaign's tracking switches, editable by editors. */
export class TrackingForm {
  readonly element: HTMLFormElement;
  private readonly opens = el('input', { id: 'track-opens', 'data-testid': 'track-opens', type: 'checkbox' });
  private readonly clicks = el('input', { id: 'track-clicks', 'data-testid': 'track-clicks', type: 'checkbox' });
  private readonly save = el('button', { type: 'submit', 'data-testid': 'tracking-save' }, 'Save the tracking');
  private readonly note = el('p', { class: 'status', role: 'status', 'data-testid': 'tracking-status' });
  private readonly error = el('p', { class: 'error', role: 'alert', 'data-testid': 'tracking-error', hidden: '' });
  private campaignId = '';
  /** Counts reads and the user's edits: a read answered after a later one, or after an edit, is not shown. */
  private generation = 0;

  constructor(
    private readonly context: ViewContext,
    private readonly campaign: HTMLSelectElement,
  ) {
    this.element = el(
      'form',
      { class: 'filters', 'data-testid': 'tracking-form', 'data-status': 'idle', 'aria-label': 'Tracking of the campaign' },
      el('div', { class: 'field' }, el('label', { for: 'track-opens' }, 'Track opens (pixel)'), this.opens),
      el('div', { class: 'field' }, el('label', { for: 'track-clicks' }, 'Track clicks (links)'), this.clicks),
      this.save,
    );
    this.element.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.submit();
    });
    campaign.addEventListener('change', () => void this.load());
    for (const box of [this.opens, this.clicks]) box.addEventListener('change', () => (this.generation += 1));
  }

  /** The parts to put on the page, in order. */
  parts(): HTMLElement[] {
    return [this.element, this.note, this.error];
  }

  /** Reads the chosen campaign's switches afresh. */
  async load(): Promise<void> {
    const campaignId = this.campaign.value;
    const generation = ++this.generation;
    this.campaignId = campaignId;
    this.error.hidden = true;
    this.element.hidden = !campaignId;
    this.note.textContent = '';
    if (!campaignId) return;
    this.element.dataset.status = 'loading';
    try {
      const campaign = await this.context.api.request<CampaignTrackingFields>('GET', campaignPath(campaignId), this.context.workspaceId());
      if (this.campaignId !== campaignId || this.generation !== generation) return;
      this.show(campaign);
    } catch (error) {
      showError(this.element, this.error, error);
    }
  }

  private show(campaign: CampaignTrackingFields): void {
    const editable = this.context.canEdit();
    this.opens.checked = campaign.track_opens;
    this.clicks.checked = campaign.track_clicks;
    this.opens.disabled = !editable;
    this.clicks.disabled = !editable;
    this.save.hidden = !editable;
    this.note.textContent = 'A run keeps the switches it started with.';
    this.element.dataset.trackOpens = String(campaign.track_opens);
    this.element.dataset.trackClicks = String(campaign.track_clicks);
    this.element.dataset.status = 'ready';
  }

  private async submit(): Promise<void> {
    const campaignId = this.campaignId;
    this.error.hidden = true;
    this.element.dataset.status = 'loading';
    this.save.disabled = true;
    try {
      const body = { track_opens: this.opens.checked, track_clicks: this.clicks.checked };
      const campaign = await this.context.api.request<CampaignTrackingFields>(
        'PUT',
        campaignPath(campaignId),
        this.context.workspaceId(),
        body,
      );
      if (this.campaignId !== campaignId) return;
      this.show(campaign);
      this.note.textContent = `Saved. ${this.note.textContent}`;
    } catch (error) {
      showError(this.element, this.error, error);
    } finally {
      this.save.disabled = false;
    }
  }
}

/** The selected run's opens, clicks, top links and bounces, read from its events (run_id). */
export class RunEngagement {
  readonly element: HTMLElement;
  private readonly refresh = el('button', { type: 'button', 'data-testid': 'run-engagement-refresh' }, 'Refresh');
  private readonly error = el('p', { class: 'error', role: 'alert', 'data-testid': 'run-engagement-error', hidden: '' });
  private readonly summary = el('p', { class: 'status', 'data-testid': 'run-engagement-summary' });
  private readonly figuresBody = el('tbody');
  private readonly linksBody = el('tbody');
  private readonly bouncesNote = el('p', { class: 'status', 'data-testid': 'run-bounces-note' });
  private readonly bouncesBody = el('tbody');
  private run: CampaignRun | undefined;
  private readAt = 0;

  constructor(private readonly context: ViewContext) {
    this.refresh.addEventListener('click', () => void this.load());
    const head = (...titles: string[]) =>
      el('thead', {}, el('tr', {}, ...titles.map((title, i) => el('th', { scope: 'col', class: i === 0 ? '' : 'num' }, title))));
    const table = (testId: string, caption: string, thead: HTMLTableSectionElement, body: HTMLTableSectionElement) =>
      el('div', { class: 'scroll' }, el('table', { 'data-testid': testId }, el('caption', {}, caption), thead, body));
    this.element = el(
      'section',
      { 'data-testid': 'run-engagement', 'data-status': 'idle', 'aria-label': 'Opens, clicks and bounces of the run', hidden: '' },
      el('h4', {}, 'Opens, clicks and bounces ', this.refresh),
      this.error,
      this.summary,
      table(
        'run-engagement-figures',
        'Machines (mail privacy proxies fetching every image, link scanners) count in no unique figure or rate.',
        head('', 'By people', 'By machines', 'Unique people', 'Of sent', 'Of delivered'),
        this.figuresBody,
      ),
      table(
        'run-top-links',
        'The 10 most clicked links (clicks and addresses of machines included).',
        head('Link', 'Clicks', 'Unique addresses'),
        this.linksBody,
      ),
      table('run-bounces', 'Bounces by class.', head('Class', 'Hard', 'Soft'), this.bouncesBody),
      this.bouncesNote,
    );
  }

  /** Shows a run (reading its figures when it is another run, or they are older than REFRESH_MS) or, undefined, nothing. */
  show(run: CampaignRun | undefined): void {
    const changed = run?.id !== this.run?.id;
    this.run = run;
    this.element.hidden = !run;
    this.element.dataset.runId = run?.id ?? '';
    if (run && (changed || Date.now() - this.readAt > REFRESH_MS)) void this.load();
  }

  private async load(): Promise<void> {
    const run = this.run;
    if (!run) return;
    this.readAt = Date.now();
    this.error.hidden = true;
    this.element.dataset.status = 'loading';
    const filters = {
      run_id: run.id,
      date_from: new Date(Date.parse(run.created_at) - CLOCK_SLACK_MS).toISOString(),
    };
    const workspaceId = this.context.workspaceId();
    try {
      const [stats, bounces] = await Promise.all([
        this.context.api.request<RunStats>('GET', `/campaign-events/stats?${new URLSearchParams(filters)}`, workspaceId),
        this.context.api.request<Page<BounceEvent>>(
          'GET',
          `/campaign-events/?${new URLSearchParams({ ...filters, event_type: 'bounce', page_size: String(BOUNCES_READ) })}`,
          workspaceId,
        ),
      ]);
      if (this.run?.id !== run.id) return;
      this.render(stats, bounces);
      this.element.dataset.status = 'ready';
    } catch (error) {
      if (this.run?.id === run.id) showError(this.element, this.error, error);
    }
  }

  private render(stats: RunStats, bounces: Page<BounceEvent>): void {
    const t = stats.totals;
    this.summary.textContent =
      `Sent ${formatCount(t.sent)}, delivered ${formatCount(t.delivered)} (as providers report it), ` +
      `bounces ${formatCount(t.hard_bounces)} hard, ${formatCount(t.soft_bounces)} soft.`;
    const row = (id: string, label: string, all: number, machines: number, unique: number, rate: number | null) =>
      el(
        'tr',
        { 'data-testid': `run-${id}` },
        el('th', { scope: 'row' }, label),
        el('td', { class: 'num', 'data-field': 'people' }, formatCount(all - machines)),
        el('td', { class: 'num', 'data-field': 'machines' }, formatCount(machines)),
        el('td', { class: 'num', 'data-field': 'unique' }, formatCount(unique)),
        el('td', { class: 'num', 'data-field': 'of-sent' }, share(unique, t.sent)),
        el('td', { class: 'num', 'data-field': 'of-delivered' }, formatRate(rate)),
      );
    this.figuresBody.replaceChildren(
      row('opens', 'Opens', t.opens, t.machine_opens, t.unique_opens, t.open_rate),
      row('clicks', 'Clicks', t.clicks, t.machine_clicks, t.unique_clicks, t.click_rate),
    );
    this.linksBody.replaceChildren(...(stats.top_links.length === 0 ? [emptyRow(3, 'No clicks yet.')] : stats.top_links.map(linkRow)));
    this.renderBounces(bounces);
  }

  private renderBounces(bounces: Page<BounceEvent>): void {
    const byClass = new Map<BounceClass, { hard: number; soft: number }>();
    for (const event of bounces.items) {
      const counts = byClass.get(event.bounce_class ?? 'unclassified') ?? { hard: 0, soft: 0 };
      if (event.bounce_type === 'soft') counts.soft += 1;
      else counts.hard += 1;
      byClass.set(event.bounce_class ?? 'unclassified', counts);
    }
    const rows = [...byClass].sort(([a, x], [b, y]) => y.hard + y.soft - (x.hard + x.soft) || a.localeCompare(b));
    this.bouncesBody.replaceChildren(
      ...(rows.length === 0
        ? [emptyRow(3, 'No bounces.')]
        : rows.map(([bounceClass, counts]) =>
            el(
              'tr',
              { 'data-bounce-class': bounceClass },
              el('th', { scope: 'row' }, BOUNCE_CLASSES[bounceClass] ?? bounceClass),
              el('td', { class: 'num', 'data-field': 'hard' }, formatCount(counts.hard)),
              el('td', { class: 'num', 'data-field': 'soft' }, formatCount(counts.soft)),
            ),
          )),
    );
    this.bouncesNote.textContent =
      bounces.total > bounces.items.length
        ? `By class: the newest ${formatCount(bounces.items.length)} of ${formatCount(bounces.total)} bounces.`
        : '';
  }
}

function emptyRow(columns: number, text: string): HTMLTableRowElement {
  return el('tr', {}, el('td', { colspan: String(columns), class: 'empty' }, text));
}

function linkRow(link: LinkStats): HTMLTableRowElement {
  return el(
    'tr',
    {},
    el('th', { scope: 'row', class: 'url' }, linkTo(link.url)),
    el('td', { class: 'num', 'data-field': 'clicks' }, formatCount(link.clicks)),
    el('td', { class: 'num', 'data-field': 'unique' }, formatCount(link.unique_clicks)),
  );
}
