import type { AbMetric, AbTestSettings, CampaignRun, Engagement, RunAbTest, RunAudience } from './api';
import { el } from './dom';
import { formatCount, formatRate } from './format';
import { confirmAction, type ViewContext } from './suppressions';

/**
 * A/B tests and follow-ups on the Campaign runs page (docs/api.md, "A/B test,
 * then the winner" and "Follow-up runs"): the chosen campaign's `ab_test`
 * form, and for the selected run its test (phase, countdown to the decision,
 * per-variant rates, picking the winner by hand) and, once completed, follow-up
 * runs to its recipients by engagement. `data-status` (idle | loading | ready |
 * error) on each part tells tests what is on screen.
 */

/** The campaign record's fields this form reads. */
interface CampaignAbFields {
  id: string;
  delivery_mode: 'single_template' | 'variants';
  ab_test: AbTestSettings | null;
}

/** The API's defaults, for a test switched on. */
const DEFAULTS: AbTestSettings = { test_fraction: 0.2, wait_minutes: 240, metric: 'open_rate' };

const PHASES: Record<RunAbTest['phase'], string> = {
  testing: 'testing (sending to the test recipients)',
  waiting: 'waiting for the decision',
  sending_winner: 'sending the winner',
  done: 'done',
};

const DECIDED_BY: Record<NonNullable<RunAbTest['decided_by']>, string> = {
  significance: 'significant at 95 % confidence',
  best_rate: 'highest rate, not significant',
  manual: 'picked by hand',
};

const FOLLOW_UPS: Array<[Engagement, string]> = [
  ['not_opened', 'Send to those who did not open'],
  ['not_clicked', 'Send to those who did not click'],
  ['opened', 'Send to those who opened'],
  ['clicked', 'Send to those who clicked'],
];

const campaignPath = (id: string): string => `/email-campaigns/${encodeURIComponent(id)}`;

function showError(part: HTMLElement, line: HTMLElement, error: unknown): void {
  line.textContent = error instanceof Error ? error.message : String(error);
  line.hidden = false;
  part.dataset.status = 'error';
}

function numberField(id: string, label: string, min: string, max: string, step: string): [HTMLDivElement, HTMLInputElement] {
  const input = el('input', { id, 'data-testid': id, type: 'number', min, max, step, required: '' });
  return [el('div', { class: 'field' }, el('label', { for: id }, label), input), input];
}

/** "Decides in 3 h 59 min 5 s" until `decideAt`, then that the decision is due. */
export function countdown(decideAt: string, now = Date.now()): string {
  const seconds = Math.ceil((Date.parse(decideAt) - now) / 1000);
  if (seconds <= 0) return 'The decision is due now.';
  const parts: string[] = [];
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  if (hours > 0) parts.push(`${hours} h`);
  if (hours > 0 || minutes > 0) parts.push(`${minutes} min`);
  parts.push(`${seconds % 60} s`);
  return `Decides in ${parts.join(' ')} (${decideAt.replace('T', ' ').replace(/\.\d+Z$|Z$/, '')} UTC).`;
}

/** The phase line of a run row's variants cell. */
export function abPhaseLine(run: CampaignRun): HTMLDivElement | undefined {
  if (!run.ab_test) return undefined;
  return el('div', { 'data-testid': 'run-ab-phase', 'data-phase': run.ab_test.phase }, `A/B test: ${PHASES[run.ab_test.phase]}`);
}

/** The chosen campaign's A/B test: off, or its settings (variants mode only). */
export class AbTestForm {
  readonly element: HTMLFormElement;
  private readonly enabled = el('input', { id: 'ab-test-on', 'data-testid': 'ab-test-on', type: 'checkbox' });
  private readonly fraction: HTMLInputElement;
  private readonly wait: HTMLInputElement;
  private readonly metric = el(
    'select',
    { id: 'ab-test-metric', 'data-testid': 'ab-test-metric' },
    new Option('Open rate', 'open_rate'),
    new Option('Click rate', 'click_rate'),
  );
  private readonly save = el('button', { type: 'submit', 'data-testid': 'ab-test-save' }, 'Save the A/B test');
  private readonly note = el('p', { class: 'status', role: 'status', 'data-testid': 'ab-test-status' });
  private readonly error = el('p', { class: 'error', role: 'alert', 'data-testid': 'ab-test-error', hidden: '' });
  private campaignId = '';
  /** Counts reads and the user's edits: a read answered after a later one, or after an edit, is not shown. */
  private generation = 0;

  constructor(
    private readonly context: ViewContext,
    private readonly campaign: HTMLSelectElement,
  ) {
    const [fractionField, fraction] = numberField('ab-test-fraction', 'Test fraction (0.01–0.5)', '0.01', '0.5', '0.01');
    const [waitField, wait] = numberField('ab-test-wait', 'Wait (minutes, 1–10080)', '1', '10080', '1');
    this.fraction = fraction;
    this.wait = wait;
    this.element = el(
      'form',
      { class: 'filters', 'data-testid': 'ab-test-form', 'data-status': 'idle', 'aria-label': 'A/B test of the campaign' },
      el('div', { class: 'field' }, el('label', { for: 'ab-test-on' }, 'A/B test, then the winner'), this.enabled),
      fractionField,
      waitField,
      el('div', { class: 'field' }, el('label', { for: 'ab-test-metric' }, 'Winner by'), this.metric),
      this.save,
    );
    this.enabled.addEventListener('change', () => this.toggle());
    this.element.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.submit();
    });
    campaign.addEventListener('change', () => void this.load());
    this.element.addEventListener('input', () => (this.generation += 1));
  }

  /** The parts to put on the page, in order. */
  parts(): HTMLElement[] {
    return [this.element, this.note, this.error];
  }

  /** Reads the chosen campaign's A/B test afresh. */
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
      const campaign = await this.context.api.request<CampaignAbFields>('GET', campaignPath(campaignId), this.context.workspaceId());
      if (this.campaignId !== campaignId || this.generation !== generation) return;
      this.show(campaign);
    } catch (error) {
      showError(this.element, this.error, error);
    }
  }

  private show(campaign: CampaignAbFields): void {
    const variants = campaign.delivery_mode === 'variants';
    const editable = variants && this.context.canEdit();
    this.enabled.checked = campaign.ab_test !== null;
    this.enabled.disabled = !editable;
    this.save.hidden = !editable;
    this.fillSettings(campaign.ab_test ?? undefined);
    this.note.textContent = variants
      ? campaign.ab_test
        ? 'Each run first sends to its test recipients, then the winner to the others.'
        : 'No A/B test: each run sends every variant by weight.'
      : 'An A/B test needs the delivery mode "variants".';
    this.element.dataset.abTest = campaign.ab_test ? 'on' : 'off';
    this.element.dataset.status = 'ready';
  }

  /** The stored settings, or the defaults a test switched on starts from. */
  private fillSettings(settings: AbTestSettings | undefined): void {
    const shown = settings ?? DEFAULTS;
    this.fraction.value = String(shown.test_fraction);
    this.wait.value = String(shown.wait_minutes);
    this.metric.value = shown.metric;
    this.toggle();
  }

  /** The settings are editable while the test is switched on; switching it off and on keeps what was typed. */
  private toggle(): void {
    const on = this.enabled.checked && !this.enabled.disabled;
    for (const input of [this.fraction, this.wait, this.metric]) input.disabled = !on;
  }

  /** What the fields say, each at its default while empty. */
  private settings(): AbTestSettings {
    return {
      test_fraction: this.fraction.value === '' ? DEFAULTS.test_fraction : Number(this.fraction.value),
      wait_minutes: this.wait.value === '' ? DEFAULTS.wait_minutes : Number(this.wait.value),
      metric: this.metric.value as AbMetric,
    };
  }

  private async submit(): Promise<void> {
    const campaignId = this.campaignId;
    this.error.hidden = true;
    this.element.dataset.status = 'loading';
    this.save.disabled = true;
    try {
      const body = { ab_test: this.enabled.checked ? this.settings() : null };
      const campaign = await this.context.api.request<CampaignAbFields>('PUT', campaignPath(campaignId), this.context.workspaceId(), body);
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

/** What the selected run's panel shows beside its recipients. */
export class RunDetail {
  readonly element: HTMLElement;
  private readonly ab = el('section', { 'data-testid': 'run-ab-test', 'aria-label': 'A/B test of the run', hidden: '' });
  private readonly phase = el('p', { class: 'status', 'data-testid': 'ab-phase' });
  private readonly countdown = el('p', { class: 'status', 'data-testid': 'ab-countdown', hidden: '' });
  private readonly verdict = el('p', { class: 'verdict', 'data-testid': 'ab-leader' });
  private readonly variantsBody = el('tbody');
  private readonly followUp = el('section', { 'data-testid': 'follow-up', 'aria-label': 'Follow-up runs', hidden: '' });
  private readonly followUpCampaign = el('select', { id: 'follow-up-campaign', 'data-testid': 'follow-up-campaign' });
  private readonly followUpButtons = FOLLOW_UPS.map(([engagement, label]) =>
    el('button', { type: 'button', 'data-testid': `follow-up-${engagement}`, 'data-engagement': engagement }, label),
  );
  private readonly error = el('p', { class: 'error', role: 'alert', 'data-testid': 'run-detail-error', hidden: '' });
  private run: CampaignRun | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;

  /**
   * `campaigns` is the page's campaign list (its options are offered for follow-ups); `changed` reads the runs again,
   * `made` shows a new run among its campaign's runs.
   */
  constructor(
    private readonly context: ViewContext,
    private readonly campaigns: HTMLSelectElement,
    private readonly changed: () => void,
    private readonly made: (run: CampaignRun) => void,
  ) {
    this.ab.append(
      el('h4', {}, 'A/B test'),
      this.phase,
      this.countdown,
      el(
        'div',
        { class: 'scroll' },
        el(
          'table',
          { 'data-testid': 'ab-variants' },
          el('caption', { class: 'visually-hidden' }, 'The test recipients per variant'),
          el(
            'thead',
            {},
            el('tr', {}, ...['Variant', 'Sent', 'Opened', 'Clicked', 'Rate', ''].map((title) => el('th', { scope: 'col' }, title))),
          ),
          this.variantsBody,
        ),
      ),
      this.verdict,
    );
    for (const button of this.followUpButtons) {
      button.addEventListener('click', () => void this.sendFollowUp(button.dataset.engagement as Engagement));
    }
    this.followUp.append(
      el('h4', {}, 'Follow up'),
      el(
        'div',
        { class: 'filters' },
        el('div', { class: 'field' }, el('label', { for: 'follow-up-campaign' }, 'Campaign to send'), this.followUpCampaign),
        ...this.followUpButtons,
      ),
    );
    this.element = el('div', { 'data-testid': 'run-detail', 'data-status': 'idle' }, this.error, this.ab, this.followUp);
  }

  /** Shows a run (again, after a reload) or, undefined, nothing. */
  show(run: CampaignRun | undefined): void {
    const changed = run?.id !== this.run?.id;
    this.run = run;
    this.stop();
    if (changed) this.error.hidden = true;
    this.element.dataset.runId = run?.id ?? '';
    this.showAbTest(run);
    this.showFollowUp(run, changed);
    if (this.element.dataset.status !== 'error' || changed) this.element.dataset.status = 'ready';
  }

  /** Stops the countdown (the view is hidden). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private showAbTest(run: CampaignRun | undefined): void {
    const test = run?.ab_test;
    this.ab.hidden = !test;
    if (!run || !test) return;
    this.ab.dataset.phase = test.phase;
    const decided = test.decided_by ? `, ${DECIDED_BY[test.decided_by]}` : '';
    const metric = test.metric === 'open_rate' ? 'open rate' : 'click rate';
    this.phase.textContent = `Phase: ${PHASES[test.phase]}. ${formatCount(test.test_recipients)} test recipients (${formatRate(test.test_fraction)}), winner by ${metric} after ${formatCount(test.wait_minutes)} min${decided}.`;
    const waiting = test.phase === 'waiting' && test.decide_at !== null;
    this.countdown.hidden = !waiting;
    if (waiting) {
      const tick = () => (this.countdown.textContent = countdown(test.decide_at!));
      tick();
      this.timer = setInterval(tick, 1000);
    }
    const labels = new Map((run.variants ?? []).map((variant) => [variant.id, variant.label ?? variant.id]));
    const canPick = waiting && this.context.canEdit() && (run.status === 'sending' || run.status === 'paused');
    this.variantsBody.replaceChildren(
      ...test.variants.map((variant) => {
        const name = labels.get(variant.variant_id) ?? variant.variant_id;
        const marks = [
          variant.variant_id === test.winner_variant_id ? 'winner' : '',
          variant.variant_id === test.leader_variant_id ? 'leader (95 %)' : '',
        ].filter(Boolean);
        const action = el('td', {});
        if (canPick) {
          const pick = el('button', { type: 'button', 'data-testid': 'ab-pick' }, 'Pick this winner');
          pick.addEventListener('click', () => void this.pick(run, variant.variant_id, name));
          action.append(pick);
        }
        return el(
          'tr',
          { 'data-variant-id': variant.variant_id, class: marks.length > 0 ? 'leader' : '' },
          el('th', { scope: 'row' }, marks.length > 0 ? `${name} (${marks.join(', ')})` : name),
          el('td', { class: 'num', 'data-testid': 'ab-sent' }, formatCount(variant.sent)),
          el('td', { class: 'num', 'data-testid': 'ab-opens' }, formatCount(variant.opens)),
          el('td', { class: 'num', 'data-testid': 'ab-clicks' }, formatCount(variant.clicks)),
          el('td', { class: 'num', 'data-testid': 'ab-rate' }, formatRate(variant.rate)),
          action,
        );
      }),
    );
    const leader = test.leader_variant_id;
    this.verdict.dataset.leader = leader ?? '';
    this.verdict.textContent = leader
      ? `${labels.get(leader) ?? leader} leads by ${metric} at 95 % confidence.`
      : `No variant leads by ${metric} at 95 % confidence yet.`;
  }

  private showFollowUp(run: CampaignRun | undefined, changed: boolean): void {
    this.followUp.hidden = run?.status !== 'completed' || !this.context.canEdit();
    if (!run || !changed) return;
    this.followUpCampaign.replaceChildren(...[...this.campaigns.options].map((option) => new Option(option.text, option.value)));
    this.followUpCampaign.value = run.campaign_id;
  }

  private async pick(run: CampaignRun, variantId: string, name: string): Promise<void> {
    if (!(await confirmAction(`Send "${name}" to every recipient still waiting for the winner? This cannot be undone.`))) return;
    this.error.hidden = true;
    this.element.dataset.status = 'loading';
    try {
      const answer = await this.context.api.request<CampaignRun>(
        'POST',
        `/campaign-runs/${encodeURIComponent(run.id)}/winner`,
        this.context.workspaceId(),
        { variant_id: variantId },
      );
      if (this.run?.id === run.id) this.show(answer);
    } catch (error) {
      showError(this.element, this.error, error);
    }
    this.changed();
  }

  private async sendFollowUp(engagement: Engagement): Promise<void> {
    const run = this.run;
    const campaignId = this.followUpCampaign.value;
    if (!run || !campaignId) return;
    this.error.hidden = true;
    this.element.dataset.status = 'loading';
    for (const button of this.followUpButtons) button.disabled = true;
    try {
      const audience: RunAudience = { run_id: run.id, engagement };
      const made = await this.context.api.request<CampaignRun>('POST', `${campaignPath(campaignId)}/runs`, this.context.workspaceId(), {
        audience,
      });
      this.element.dataset.status = 'ready';
      this.made(made);
    } catch (error) {
      showError(this.element, this.error, error);
    } finally {
      for (const button of this.followUpButtons) button.disabled = false;
    }
  }
}
