import type { RecipientDatabase } from './api';
import { byId } from './dom';
import { confirmAction, type ViewContext } from './suppressions';

/**
 * The Workspace page: where the chosen workspace's recipients come from (the
 * shared recipient database, or its own: kind, host, port, database, user,
 * when it was verified; never a password). Platform admins also get a form to
 * set or replace the URL (a password field, never filled in by the page) and a
 * button to go back to the shared database. `data-status` (idle | loading |
 * ready | error) on the view tells tests what is on screen.
 */

const FIELDS = ['kind', 'host', 'port', 'database', 'user', 'verified_at'] as const;

const when = (iso: string | null): string => (iso ? `${iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '')} UTC` : '');

export class WorkspaceView {
  private readonly view = byId<HTMLElement>('workspace-view');
  private readonly error = byId<HTMLParagraphElement>('workspace-error');
  private readonly status = byId<HTMLParagraphElement>('workspace-status');
  private readonly source = byId<HTMLElement>('recipient-source');
  private readonly details = byId<HTMLElement>('recipient-details');
  private readonly form = byId<HTMLFormElement>('recipient-form');
  private readonly url = byId<HTMLInputElement>('recipient-url');
  private readonly useShared = byId<HTMLButtonElement>('recipient-use-shared');
  private loading: AbortController | undefined;

  constructor(
    private readonly context: ViewContext,
    private readonly isPlatformAdmin: () => boolean,
  ) {
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.save();
    });
    this.useShared.addEventListener('click', () => void this.removeOwn());
  }

  async load(): Promise<void> {
    const workspaceId = this.context.workspaceId();
    if (!workspaceId) return;
    this.loading?.abort();
    const loading = new AbortController();
    this.loading = loading;
    this.form.hidden = !this.isPlatformAdmin();
    this.url.value = '';
    this.clearError();
    this.view.dataset.status = 'loading';
    this.status.textContent = 'Loading…';
    try {
      this.show(await this.context.api.recipientDatabase(workspaceId, loading.signal));
    } catch (error) {
      if (loading.signal.aborted) return;
      this.showFailure(error);
    }
  }

  private show(database: RecipientDatabase): void {
    this.source.textContent = database.shared
      ? 'The shared recipient database of the platform.'
      : `Its own ${database.kind === 'mssql' ? 'SQL Server' : 'PostgreSQL'} database.`;
    this.details.hidden = database.shared;
    for (const field of FIELDS) {
      const value = database[field];
      byId(`recipient-${field.replace('_', '-')}`).textContent = field === 'verified_at' ? when(database.verified_at) : String(value ?? '');
    }
    this.useShared.hidden = database.shared;
    this.view.dataset.shared = String(database.shared);
    this.view.dataset.status = 'ready';
    this.status.textContent = '';
  }

  private async save(): Promise<void> {
    const url = this.url.value.trim();
    if (!url) return;
    this.clearError();
    this.view.dataset.status = 'loading';
    this.status.textContent = 'Trying the database…';
    try {
      const stored = await this.context.api.putRecipientDatabase(this.context.workspaceId(), url);
      this.url.value = '';
      this.show(stored);
      this.status.textContent = 'Saved: the database answered, and its URL is stored encrypted.';
    } catch (error) {
      this.showFailure(error);
    }
  }

  private async removeOwn(): Promise<void> {
    if (!(await confirmAction("Go back to the shared recipient database? The workspace's own URL is forgotten."))) return;
    this.clearError();
    try {
      await this.context.api.deleteRecipientDatabase(this.context.workspaceId());
      await this.load();
    } catch (error) {
      this.showFailure(error);
    }
  }

  private showFailure(error: unknown): void {
    this.error.textContent = error instanceof Error ? error.message : String(error);
    this.error.hidden = false;
    this.status.textContent = '';
    this.view.dataset.status = 'error';
  }

  private clearError(): void {
    this.error.textContent = '';
    this.error.hidden = true;
  }
}
