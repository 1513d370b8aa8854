import { abPhaseLine, AbTestForm, RunDetail } from './ab-test';
import type { CampaignRun, RecipientStatus, RunAction, RunRecipient } from './api';
import { byId } from './dom';
import { formatCount } from './format';
import { confirmAction, type ViewContext } from './suppressions';
import { RunEngagement, TrackingForm } from './tracking';

/**
 * The Campaign runs page: a campaign's runs (newest first) with a progress bar
 * (sent of recipients), status, counts and per-variant figures, and for
 * editors "Send now", pause, resume and cancel; under it, one run's recipients
 * with the status filter. While a run of the page is queued or sending, the
 * page reads the runs again every POLL_MS. `data-status` (idle | loading |
 * ready | error) on the view and on the recipients panel tells tests what is
 * on screen.
 */

const RUNS_PAGE_SIZE = 20;
const RECIPIENTS_PAGE_SIZE = 50;
const POLL_MS = 1_000;

/** The actions a run's status allows (docs/api.md, "Campaign runs"). */
const ACTIONS: Record<RunAction, { label: string; allowed: ReadonlySet<CampaignRun['status']>; confirm?: string }> = {
  pause: { label: 'Pause', allowed: new Set(['queued', 'sending']) },
  resume: { label: 'Resume', allowed: new Set(['paused']) },
  cancel: {
    label: 'Cancel',
    allowed: new Set(['queued', 'sending', 'paused']),
    confirm: 'Cancel this run? Its unsent recipients will not get the message.',
  },
};

const ACTIVE: ReadonlySet<CampaignRun['status']> = new Set(['queued', 'sending']);

const when = (iso: string | null): string => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '') : '');

function cell(text: string, testId?: string): HTMLTableCellElement {
  const td = document.createElement('td');
  td.textContent = text;
  if (testId) td.dataset.testid = testId;
  return td;
}

function showFailure(view: HTMLElement, line: HTMLParagraphElement, error: unknown): void {
  line.textContent = error instanceof Error ? error.message : String(error);
  line.hidden = false;
  view.dataset.status = 'error';
}

/** `<progress>` of sent over recipients, with the figures beside it. */
function progressCell(run: CampaignRun): HTMLTableCellElement {
  const td = cell('', 'run-progress');
  const bar = document.createElement('progress');
  bar.max = Math.max(run.counts.recipients, 1);
  bar.value = run.counts.sent;
  bar.dataset.testid = 'run-progress-bar';
  const text = document.createElement('span');
  text.dataset.testid = 'run-progress-text';
  text.textContent = `${formatCount(run.counts.sent)} of ${formatCount(run.counts.recipients)} sent`;
  td.append(bar, ' ', text);
  return td;
}

function variantsCell(run: CampaignRun): HTMLTableCellElement {
  const td = cell('', 'run-variants');
  for (const variant of run.variants ?? []) {
    const line = document.createElement('div');
    line.dataset.variantId = variant.id;
    line.textContent = `${variant.label ?? variant.id} (weight ${variant.weight}): ${formatCount(variant.sent)} of ${formatCount(variant.recipients)} sent`;
    td.append(line);
  }
  if (!run.variants) td.textContent = '–';
  const phase = abPhaseLine(run);
  if (phase) td.prepend(phase);
  return td;
}

export class RunsView {
  private readonly view = byId<HTMLElement>('runs-view');
  private readonly campaign = byId<HTMLSelectElement>('runs-campaign');
  private readonly sendNowButton = byId<HTMLButtonElement>('send-now');
  private readonly error = byId<HTMLParagraphElement>('runs-error');
  private readonly status = byId<HTMLParagraphElement>('runs-status');
  private readonly body = document.querySelector<HTMLTableSectionElement>('[data-testid="runs-list"] tbody')!;
  private readonly prev = byId<HTMLButtonElement>('runs-prev');
  private readonly next = byId<HTMLButtonElement>('runs-next');
  private readonly panel = byId<HTMLElement>('recipients-panel');
  private readonly heading = byId<HTMLHeadingElement>('recipients-heading');
  private readonly statusFilter = byId<HTMLSelectElement>('recipients-status');
  private readonly recipientsError = byId<HTMLParagraphElement>('recipients-error');
  private readonly summary = byId<HTMLParagraphElement>('recipients-summary');
  private readonly recipientsBody = document.querySelector<HTMLTableSectionElement>('[data-testid="recipients-list"] tbody')!;
  private readonly recipientsPrev = byId<HTMLButtonElement>('recipients-prev');
  private readonly recipientsNext = byId<HTMLButtonElement>('recipients-next');
  private page = 1;
  private recipientsPage = 1;
  private selectedRun: CampaignRun | undefined;
  private poll: ReturnType<typeof setTimeout> | undefined;
  private readonly abTest: AbTestForm;
  private readonly detail: RunDetail;
  private readonly tracking: TrackingForm;
  private readonly engagement: RunEngagement;

  constructor(private readonly context: ViewContext) {
    this.abTest = new AbTestForm(context, this.campaign);
    this.tracking = new TrackingForm(context, this.campaign);
    byId('runs-filters').after(...this.abTest.parts(), ...this.tracking.parts());
    this.detail = new RunDetail(
      context,
      this.campaign,
      () => void this.loadRuns(),
      (run) => this.showRun(run),
    );
    this.engagement = new RunEngagement(context);
    this.heading.after(this.detail.element, this.engagement.element);
    this.campaign.addEventListener('change', () => {
      this.page = 1;
      this.selectRun(undefined);
      void this.loadRuns();
    });
    this.sendNowButton.addEventListener('click', () => void this.sendNow());
    this.prev.addEventListener('click', () => {
      this.page = Math.max(1, this.page - 1);
      void this.loadRuns();
    });
    this.next.addEventListener('click', () => {
      this.page += 1;
      void this.loadRuns();
    });
    this.statusFilter.addEventListener('change', () => {
      this.recipientsPage = 1;
      void this.loadRecipients();
    });
    this.recipientsPrev.addEventListener('click', () => {
      this.recipientsPage = Math.max(1, this.recipientsPage - 1);
      void this.loadRecipients();
    });
    this.recipientsNext.addEventListener('click', () => {
      this.recipientsPage += 1;
      void this.loadRecipients();
    });
  }

  /** Shows the view: the workspace's campaigns (read afresh: one may just have been made), then the chosen one's runs. */
  async load(): Promise<void> {
    const workspaceId = this.context.workspaceId();
    if (!workspaceId) return;
    this.error.hidden = true;
    this.view.dataset.status = 'loading';
    try {
      const campaigns = (await this.context.api.campaigns(workspaceId)).sort((a, b) => a.name.localeCompare(b.name));
      const chosen = this.campaign.value;
      this.campaign.replaceChildren(...campaigns.map((c) => new Option(c.name, c.id)));
      if (campaigns.some((c) => c.id === chosen)) this.campaign.value = chosen;
    } catch (error) {
      showFailure(this.view, this.error, error);
      return;
    }
    void this.abTest.load();
    void this.tracking.load();
    await this.loadRuns();
  }

  /** Stops reading the runs again (the view is hidden). */
  stop(): void {
    clearTimeout(this.poll);
    this.poll = undefined;
    this.detail.stop();
  }

  /** A run made on this page (a follow-up), among its campaign's runs. */
  private showRun(run: CampaignRun): void {
    const otherCampaign = this.campaign.value !== run.campaign_id;
    this.campaign.value = run.campaign_id;
    if (otherCampaign) {
      void this.abTest.load();
      void this.tracking.load();
    }
    this.page = 1;
    this.selectRun(run);
    void this.loadRuns();
  }

  private async loadRuns(): Promise<void> {
    this.stop();
    const workspaceId = this.context.workspaceId();
    const campaignId = this.campaign.value;
    this.sendNowButton.hidden = !this.context.canEdit() || !campaignId;
    if (!campaignId) {
      this.body.replaceChildren();
      this.status.textContent = 'No campaign in this workspace yet.';
      this.view.dataset.status = 'ready';
      return;
    }
    this.error.hidden = true;
    if (this.view.dataset.status !== 'ready') this.view.dataset.status = 'loading';
    try {
      const answer = await this.context.api.runs(workspaceId, campaignId, this.page, RUNS_PAGE_SIZE);
      if (this.campaign.value !== campaignId) return;
      this.body.replaceChildren(...answer.items.map((run) => this.runRow(run)));
      this.status.textContent =
        answer.total === 0 ? 'This campaign has not run yet.' : `Page ${answer.page}: ${answer.items.length} of ${answer.total} runs.`;
      this.prev.disabled = answer.page <= 1;
      this.next.disabled = answer.page * answer.page_size >= answer.total;
      this.view.dataset.total = String(answer.total);
      this.view.dataset.status = 'ready';
      const selected = this.selectedRun && answer.items.find((run) => run.id === this.selectedRun!.id);
      if (selected) this.selectRun(selected, false);
      if (answer.items.some((run) => ACTIVE.has(run.status)) && !this.view.hidden) {
        this.poll = setTimeout(() => void this.loadRuns(), POLL_MS);
      }
    } catch (error) {
      showFailure(this.view, this.error, error);
    }
  }

  private runRow(run: CampaignRun): HTMLTableRowElement {
    const tr = document.createElement('tr');
    tr.dataset.runId = run.id;
    tr.dataset.status = run.status;
    const status = cell(run.status, 'run-status');
    if (run.failure) status.title = run.failure;
    const c = run.counts;
    tr.append(
      cell(when(run.created_at), 'run-created'),
      cell(run.trigger === 'schedule' ? `schedule (${when(run.scheduled_for)})` : 'manual', 'run-trigger'),
      status,
      progressCell(run),
      ...(['sent', 'failed', 'suppressed', 'invalid', 'duplicates', 'pending', 'unknown'] as const).map((key) => {
        const td = cell(formatCount(c[key]), `run-${key}`);
        td.className = 'num';
        return td;
      }),
      variantsCell(run),
      this.actionsCell(run),
    );
    return tr;
  }

  private actionsCell(run: CampaignRun): HTMLTableCellElement {
    const td = cell('', 'run-actions');
    const recipients = document.createElement('button');
    recipients.type = 'button';
    recipients.textContent = 'Recipients';
    recipients.dataset.testid = 'run-recipients';
    recipients.addEventListener('click', () => this.selectRun(run));
    td.append(recipients);
    if (!this.context.canEdit()) return td;
    for (const [action, { label, allowed }] of Object.entries(ACTIONS) as [RunAction, (typeof ACTIONS)[RunAction]][]) {
      if (!allowed.has(run.status)) continue;
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = label;
      button.dataset.testid = `run-${action}`;
      button.addEventListener('click', () => void this.act(run, action));
      td.append(' ', button);
    }
    return td;
  }

  private async act(run: CampaignRun, action: RunAction): Promise<void> {
    const question = ACTIONS[action].confirm;
    if (question && !(await confirmAction(question))) return;
    try {
      await this.context.api.runAction(this.context.workspaceId(), run.id, action);
    } catch (error) {
      showFailure(this.view, this.error, error);
    }
    await this.loadRuns();
  }

  private async sendNow(): Promise<void> {
    this.sendNowButton.disabled = true;
    try {
      const run = await this.context.api.sendNow(this.context.workspaceId(), this.campaign.value);
      this.page = 1;
      this.selectRun(run, false);
    } catch (error) {
      showFailure(this.view, this.error, error);
      return;
    } finally {
      this.sendNowButton.disabled = false;
    }
    await this.loadRuns();
  }

  /** Shows (or, undefined, hides) a run's recipients; `reset` starts them from the first page with no filter. */
  private selectRun(run: CampaignRun | undefined, reset = true): void {
    const changed = run?.id !== this.selectedRun?.id;
    this.selectedRun = run;
    this.panel.hidden = run === undefined;
    this.detail.show(run);
    this.engagement.show(run);
    if (!run) return;
    this.heading.textContent = `Recipients of the run of ${when(run.created_at)} (${run.status})`;
    this.panel.dataset.runId = run.id;
    if (reset && changed) {
      this.recipientsPage = 1;
      this.statusFilter.value = '';
    }
    if (reset || changed) void this.loadRecipients();
  }

  private async loadRecipients(): Promise<void> {
    const run = this.selectedRun;
    if (!run) return;
    const status = (this.statusFilter.value || undefined) as RecipientStatus | undefined;
    this.recipientsError.hidden = true;
    this.panel.dataset.status = 'loading';
    try {
      const answer = await this.context.api.runRecipients(this.context.workspaceId(), run.id, {
        status,
        page: this.recipientsPage,
        page_size: RECIPIENTS_PAGE_SIZE,
      });
      if (this.selectedRun?.id !== run.id) return;
      const labels = new Map((run.variants ?? []).map((variant) => [variant.id, variant.label ?? variant.id]));
      this.recipientsBody.replaceChildren(...answer.items.map((item) => this.recipientRow(item, labels)));
      this.summary.textContent = `Page ${answer.page}: ${answer.items.length} of ${answer.total} recipients${status ? ` (${status})` : ''}.`;
      this.recipientsPrev.disabled = answer.page <= 1;
      this.recipientsNext.disabled = answer.page * answer.page_size >= answer.total;
      this.panel.dataset.total = String(answer.total);
      this.panel.dataset.filter = status ?? '';
      this.panel.dataset.status = 'ready';
    } catch (error) {
      showFailure(this.panel, this.recipientsError, error);
    }
  }

  private recipientRow(item: RunRecipient, labels: ReadonlyMap<string, string>): HTMLTableRowElement {
    const tr = document.createElement('tr');
    tr.dataset.email = item.email;
    tr.dataset.status = item.status;
    tr.append(
      cell(item.email, 'recipient-email'),
      cell(item.status, 'recipient-status'),
      cell(item.variant_id ? (labels.get(item.variant_id) ?? item.variant_id) : '', 'recipient-variant'),
      cell(item.message_id ?? '', 'recipient-message-id'),
      cell(when(item.sent_at), 'recipient-sent-at'),
      cell(item.error ?? '', 'recipient-error'),
    );
    return tr;
  }
}
