import { ApiError, type Api, type SuppressionDetail, type SuppressionReason } from './api';
import { byId } from './dom';

/**
 * The Suppressions page (search, filter by reason, add and lift with a
 * confirmation for editors and above, CSV export) and the Address lookup
 * (one address's suppression and events). `data-status` (idle | loading |
 * ready | error) on each view tells tests what is on screen.
 */

const PAGE_SIZE = 50;

const REASON_LABELS: Record<SuppressionReason, string> = {
  hard_bounce: 'Hard bounce',
  soft_bounces: 'Soft bounces',
  unsubscribe: 'Unsubscribe',
  spam_report: 'Spam report',
  manual: 'Added by hand',
};

/** What the views need from the page: the API, the chosen workspace, whether the caller may change suppressions. */
export interface ViewContext {
  api: Api;
  workspaceId(): string;
  canEdit(): boolean;
  /** Opens the lookup of one address. */
  lookUp(email: string): void;
}

const when = (iso: string | null | undefined): string => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '') : '');

function cell(text: string): HTMLTableCellElement {
  const td = document.createElement('td');
  td.textContent = text;
  return td;
}

function row(...cells: HTMLTableCellElement[]): HTMLTableRowElement {
  const tr = document.createElement('tr');
  tr.append(...cells);
  return tr;
}

/** The failure on screen: its message in the view's error line, the view marked `error`. */
function showFailure(view: HTMLElement, line: HTMLParagraphElement, error: unknown): void {
  line.textContent = error instanceof Error ? error.message : String(error);
  line.hidden = false;
  view.dataset.status = 'error';
}

/** A yes/no question in the page's own dialog. */
export function confirmAction(text: string): Promise<boolean> {
  const dialog = byId<HTMLDialogElement>('confirm');
  byId('confirm-text').textContent = text;
  dialog.showModal();
  return new Promise((resolve) => {
    const answer = (yes: boolean) => () => {
      dialog.close();
      yes_.removeEventListener('click', onYes);
      no.removeEventListener('click', onNo);
      resolve(yes);
    };
    const yes_ = byId<HTMLButtonElement>('confirm-yes');
    const no = byId<HTMLButtonElement>('confirm-no');
    const onYes = answer(true);
    const onNo = answer(false);
    yes_.addEventListener('click', onYes);
    no.addEventListener('click', onNo);
  });
}

export class SuppressionsView {
  private readonly view = byId<HTMLElement>('suppressions-view');
  private readonly search = byId<HTMLFormElement>('suppression-search');
  private readonly query = byId<HTMLInputElement>('suppression-q');
  private readonly reason = byId<HTMLSelectElement>('suppression-reason');
  private readonly addForm = byId<HTMLFormElement>('suppression-add');
  private readonly addEmail = byId<HTMLInputElement>('add-email');
  private readonly addNote = byId<HTMLInputElement>('add-note');
  private readonly error = byId<HTMLParagraphElement>('suppressions-error');
  private readonly status = byId<HTMLParagraphElement>('suppressions-status');
  private readonly body = document.querySelector<HTMLTableSectionElement>('[data-testid="suppressions-list"] tbody')!;
  private readonly prev = byId<HTMLButtonElement>('suppressions-prev');
  private readonly next = byId<HTMLButtonElement>('suppressions-next');
  private page = 1;

  constructor(private readonly context: ViewContext) {
    this.search.addEventListener('submit', (event) => {
      event.preventDefault();
      this.page = 1;
      void this.load();
    });
    this.reason.addEventListener('change', () => {
      this.page = 1;
      void this.load();
    });
    this.prev.addEventListener('click', () => {
      this.page = Math.max(1, this.page - 1);
      void this.load();
    });
    this.next.addEventListener('click', () => {
      this.page += 1;
      void this.load();
    });
    this.addForm.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.add();
    });
    byId('export-csv').addEventListener('click', () => void this.export());
  }

  private filters() {
    return { q: this.query.value.trim() || undefined, reason: (this.reason.value || undefined) as SuppressionReason | undefined };
  }

  private fail(error: unknown): void {
    showFailure(this.view, this.error, error);
  }

  async load(): Promise<void> {
    const workspaceId = this.context.workspaceId();
    if (!workspaceId) return;
    this.addForm.hidden = !this.context.canEdit();
    this.error.hidden = true;
    this.view.dataset.status = 'loading';
    try {
      const answer = await this.context.api.suppressions(workspaceId, { ...this.filters(), page: this.page, page_size: PAGE_SIZE });
      this.body.replaceChildren(...answer.items.map((item) => this.itemRow(item.email, item.reason, item.suppressed_at)));
      this.status.textContent = `Page ${answer.page}: ${answer.items.length} of ${answer.total} suppressed addresses.`;
      this.prev.disabled = answer.page <= 1;
      this.next.disabled = answer.page * answer.page_size >= answer.total;
      this.view.dataset.total = String(answer.total);
      this.view.dataset.status = 'ready';
    } catch (error) {
      this.fail(error);
    }
  }

  private itemRow(email: string, reason: SuppressionReason, since: string): HTMLTableRowElement {
    const link = document.createElement('a');
    link.href = '#lookup';
    link.textContent = email;
    link.addEventListener('click', (event) => {
      event.preventDefault();
      this.context.lookUp(email);
    });
    const address = document.createElement('td');
    address.append(link);
    const actions = document.createElement('td');
    if (this.context.canEdit()) {
      const lift = document.createElement('button');
      lift.type = 'button';
      lift.textContent = 'Lift';
      lift.dataset.testid = 'lift';
      lift.addEventListener('click', () => void this.lift(email));
      actions.append(lift);
    }
    const tr = row(address, cell(REASON_LABELS[reason] ?? reason), cell(when(since)), actions);
    tr.dataset.email = email;
    tr.dataset.reason = reason;
    return tr;
  }

  private async add(): Promise<void> {
    const email = this.addEmail.value.trim();
    if (!email || !(await confirmAction(`Suppress ${email}? No campaign will mail it until the suppression is lifted.`))) return;
    try {
      await this.context.api.addSuppression(this.context.workspaceId(), email, this.addNote.value.trim());
      this.addEmail.value = '';
      this.addNote.value = '';
      await this.load();
    } catch (error) {
      this.fail(error);
    }
  }

  private async lift(email: string): Promise<void> {
    if (!(await confirmAction(`Lift the suppression of ${email}? Campaigns may mail it again.`))) return;
    try {
      await this.context.api.liftSuppression(this.context.workspaceId(), email);
      await this.load();
    } catch (error) {
      this.fail(error);
    }
  }

  private async export(): Promise<void> {
    try {
      const csv = await this.context.api.suppressionsCsv(this.context.workspaceId(), this.filters());
      const link = document.createElement('a');
      link.href = URL.createObjectURL(csv);
      link.download = 'suppressions.csv';
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
    } catch (error) {
      this.fail(error);
    }
  }
}

export class LookupView {
  private readonly view = byId<HTMLElement>('lookup-view');
  private readonly form = byId<HTMLFormElement>('lookup-form');
  private readonly email = byId<HTMLInputElement>('lookup-email');
  private readonly error = byId<HTMLParagraphElement>('lookup-error');
  private readonly state = byId<HTMLParagraphElement>('lookup-state');
  private readonly history = document.querySelector<HTMLTableSectionElement>('[data-testid="lookup-history"] tbody')!;
  private readonly timeline = document.querySelector<HTMLTableSectionElement>('[data-testid="lookup-timeline"] tbody')!;

  constructor(
    private readonly context: ViewContext,
    private readonly campaignName: (workspaceId: string, id: string) => Promise<string>,
  ) {
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.load();
    });
  }

  show(email: string): Promise<void> {
    this.email.value = email;
    return this.load();
  }

  async load(): Promise<void> {
    const workspaceId = this.context.workspaceId();
    const email = this.email.value.trim();
    if (!workspaceId || !email) return;
    this.error.hidden = true;
    this.view.dataset.status = 'loading';
    try {
      const [detail, events] = await Promise.all([
        this.context.api.suppression(workspaceId, email).catch((error: unknown) => {
          if (error instanceof ApiError && error.status === 404) return undefined;
          throw error;
        }),
        this.context.api.eventsOf(workspaceId, email),
      ]);
      this.showState(detail);
      this.history.replaceChildren(...this.historyRows(detail));
      const names = await Promise.all(events.items.map((event) => this.campaignName(workspaceId, event.campaign_id)));
      this.timeline.replaceChildren(
        ...events.items.map((event, index) =>
          row(
            cell(when(event.occurred_at)),
            cell(event.bounce_type ? `${event.event_type} (${event.bounce_type})` : event.event_type),
            cell(names[index]),
            cell(event.url ?? event.reason ?? ''),
          ),
        ),
      );
      this.view.dataset.events = String(events.total);
      this.view.dataset.status = 'ready';
    } catch (error) {
      showFailure(this.view, this.error, error);
    }
  }

  private showState(detail: SuppressionDetail | undefined): void {
    this.view.dataset.suppressed = String(detail?.suppressed ?? false);
    if (!detail) this.state.textContent = 'Never suppressed in this workspace.';
    else if (detail.suppressed && detail.reason) {
      this.state.textContent = `Suppressed since ${when(detail.suppressed_at)} UTC: ${REASON_LABELS[detail.reason]}${detail.note ? ` (${detail.note})` : ''}.`;
    } else this.state.textContent = 'Not suppressed now (lifted).';
  }

  private historyRows(detail: SuppressionDetail | undefined): HTMLTableRowElement[] {
    if (!detail) return [];
    const by = (actor: { email: string } | null) => actor?.email ?? 'unknown';
    const entries: Array<[string, string, string]> = [
      ...detail.events.map((event): [string, string, string] => [
        event.occurred_at,
        event.reason.replace('_', ' '),
        event.provider_event_id,
      ]),
      ...detail.additions.map((addition): [string, string, string] => [
        addition.added_at,
        'added by hand',
        `${by(addition.added_by)}${addition.note ? `: ${addition.note}` : ''}`,
      ]),
      ...detail.lifts.map((lift): [string, string, string] => [lift.lifted_at, 'lifted', by(lift.lifted_by)]),
    ];
    entries.sort((a, b) => b[0].localeCompare(a[0]));
    return entries.map(([at, what, detailText]) => row(cell(when(at)), cell(what), cell(detailText)));
  }
}
