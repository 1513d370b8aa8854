import './style.css';
import { Api, ApiError, type CampaignSummary, type Me, type StatsQuery } from './api';
import { SeriesChart } from './chart';
import { utcDate } from './format';
import { renderCampaigns, renderFunnel, renderLinks, renderSeriesTable, renderSuppressions, renderTotals, renderVariants } from './render';

/**
 * The analytics dashboard. The token the user pastes stays in this tab's
 * sessionStorage and goes only to this origin's API; with DEV_AUTH_ENABLED=1
 * none is needed. `data-status` (idle | loading | ready | error) and
 * `data-query` on <main> tell tests and scripts what is on screen.
 */

const TOKEN_KEY = 'mail-dashboard.token';
const WORKSPACE_KEY = 'mail-dashboard.workspace';
const DEFAULT_DAYS = 7;
/** A performance mark: the first statistics on screen, measured from navigation start. */
const FIRST_VIEW_MARK = 'dashboard-first-view';

function byId<T extends HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (!node) throw new Error(`#${id} is missing from the page`);
  return node as T;
}

const ui = {
  authForm: byId<HTMLFormElement>('auth-form'),
  token: byId<HTMLInputElement>('token'),
  signOut: byId<HTMLButtonElement>('sign-out'),
  user: byId<HTMLOutputElement>('user'),
  main: byId<HTMLElement>('dashboard'),
  filters: byId<HTMLFormElement>('filters'),
  workspace: byId<HTMLSelectElement>('workspace'),
  from: byId<HTMLInputElement>('date-from'),
  to: byId<HTMLInputElement>('date-to'),
  interval: byId<HTMLSelectElement>('interval'),
  campaign: byId<HTMLSelectElement>('campaign'),
  error: byId<HTMLParagraphElement>('error'),
  status: byId<HTMLParagraphElement>('status'),
  results: byId<HTMLElement>('results'),
  funnel: byId<HTMLElement>('funnel'),
  totals: byId<HTMLElement>('totals'),
  variantsSection: byId<HTMLElement>('variants-section'),
  variants: byId<HTMLElement>('variants'),
  chartFigure: byId<HTMLElement>('chart-figure'),
  chartCaption: byId<HTMLElement>('chart-caption'),
  seriesTable: document.querySelector<HTMLTableElement>('[data-testid="series-table"]')!,
  campaignsTable: document.querySelector<HTMLTableElement>('[data-testid="campaigns-table"]')!,
  suppressionsTable: document.querySelector<HTMLTableElement>('[data-testid="suppressions-table"]')!,
  linksTable: document.querySelector<HTMLTableElement>('[data-testid="links-table"]')!,
};

const api = new Api(() => sessionStorage.getItem(TOKEN_KEY) ?? '');
const chart = new SeriesChart(byId('chart'));
/** Campaign names per workspace, loaded once per workspace. */
const campaignsByWorkspace = new Map<string, Promise<CampaignSummary[]>>();
let inFlight: AbortController | undefined;

type Status = 'idle' | 'loading' | 'ready' | 'error';

/** Figures stay on screen only while they answer the filters shown: hidden after a failure or sign-out. */
function setStatus(status: Status, text = ''): void {
  ui.main.dataset.status = status;
  if (status === 'ready') ui.results.hidden = false;
  if (status === 'error' || status === 'idle') ui.results.hidden = true;
  ui.main.setAttribute('aria-busy', String(status === 'loading'));
  ui.status.textContent = text;
}

function showError(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  const hint =
    error instanceof ApiError && error.status === 401
      ? ' Paste a valid token above and sign in.'
      : error instanceof ApiError && error.status === 403
        ? ' Your role does not allow this in the chosen workspace.'
        : '';
  ui.error.textContent = message + hint;
  ui.error.hidden = false;
  if (error instanceof ApiError && error.status === 401) ui.token.focus();
}

function clearError(): void {
  ui.error.textContent = '';
  ui.error.hidden = true;
}

/** Cancels whatever is loading and returns the signal of a new load. */
function newLoad(): AbortSignal {
  inFlight?.abort();
  inFlight = new AbortController();
  return inFlight.signal;
}

function isAbort(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError';
}

async function signIn(): Promise<void> {
  const signal = newLoad();
  clearError();
  setStatus('loading', 'Signing in…');
  let me: Me;
  try {
    me = await api.me(signal);
  } catch (error) {
    if (isAbort(error)) return;
    ui.user.textContent = 'Not signed in';
    fillWorkspaces([]);
    showError(error);
    setStatus('error');
    return;
  }
  ui.user.textContent = `Signed in as ${me.display_name} (${me.email})`;
  // A platform admin is listed in every workspace (role platform_admin).
  const workspaces = me.memberships.map((m): [string, string] => [m.workspace_id, `${m.workspace_name} (${m.role.replace('_', ' ')})`]);
  fillWorkspaces(workspaces);
  if (workspaces.length === 0) {
    setStatus('error');
    showError(new Error('You are not a member of any workspace yet: ask a workspace admin to add you.'));
    return;
  }
  await loadWorkspace();
}

function fillWorkspaces(workspaces: Array<[string, string]>): void {
  const previous = ui.workspace.value || sessionStorage.getItem(WORKSPACE_KEY) || '';
  workspaces.sort((a, b) => a[1].localeCompare(b[1]));
  ui.workspace.replaceChildren(...workspaces.map(([id, label]) => new Option(label, id)));
  if (workspaces.some(([id]) => id === previous)) ui.workspace.value = previous;
  ui.workspace.disabled = workspaces.length === 0;
}

async function loadWorkspace(): Promise<void> {
  sessionStorage.setItem(WORKSPACE_KEY, ui.workspace.value);
  ui.campaign.replaceChildren(new Option('All campaigns', ''));
  await loadStats();
}

/** Not cancelled with the stats: a later load of the same workspace reuses it. */
function campaignsOf(workspaceId: string): Promise<CampaignSummary[]> {
  let campaigns = campaignsByWorkspace.get(workspaceId);
  if (!campaigns) {
    campaigns = api.campaigns(workspaceId);
    campaignsByWorkspace.set(workspaceId, campaigns);
    campaigns.catch(() => campaignsByWorkspace.delete(workspaceId));
  }
  return campaigns;
}

function fillCampaigns(campaigns: CampaignSummary[]): void {
  const chosen = ui.campaign.value;
  const sorted = [...campaigns].sort((a, b) => a.name.localeCompare(b.name));
  ui.campaign.replaceChildren(new Option('All campaigns', ''), ...sorted.map((c) => new Option(c.name, c.id)));
  ui.campaign.value = sorted.some((c) => c.id === chosen) ? chosen : '';
}

function currentQuery(): StatsQuery {
  return {
    date_from: ui.from.value,
    date_to: ui.to.value,
    interval: ui.interval.value === 'hour' ? 'hour' : 'day',
    campaign_id: ui.campaign.value || undefined,
  };
}

async function loadStats(): Promise<void> {
  const workspaceId = ui.workspace.value;
  if (!workspaceId) return;
  const query = currentQuery();
  if (!query.date_from || !query.date_to) {
    showError(new Error('Choose both dates.'));
    return;
  }
  if (query.date_from > query.date_to) {
    showError(new Error('"From" must not be after "To".'));
    return;
  }
  const signal = newLoad();
  clearError();
  setStatus('loading', 'Loading…');
  const [campaigns, stats] = await Promise.allSettled([campaignsOf(workspaceId), api.stats(workspaceId, query, signal)]);
  if (signal.aborted) return;
  if (stats.status === 'rejected') {
    showError(stats.reason);
    setStatus('error');
    return;
  }
  const names = new Map<string, string>();
  if (campaigns.status === 'fulfilled') {
    fillCampaigns(campaigns.value);
    for (const c of campaigns.value) names.set(c.id, c.name);
  } else {
    showError(campaigns.reason);
  }

  const data = stats.value;
  ui.results.hidden = false; // before drawing, so the chart takes its real width
  renderFunnel(ui.funnel, data.totals);
  renderTotals(ui.totals, data.totals);
  renderCampaigns(ui.campaignsTable, data.campaigns, names);
  renderVariants(ui.variantsSection, ui.variants, data, names);
  renderSeriesTable(ui.seriesTable, data.series, query.interval);
  renderSuppressions(ui.suppressionsTable, data);
  renderLinks(ui.linksTable, data.top_links, names);
  chart.draw(data.series, query.interval);
  ui.chartFigure.dataset.points = String(data.series.length);
  ui.chartFigure.dataset.interval = query.interval;
  ui.chartCaption.textContent =
    data.series.length === 0
      ? 'No events in this range.'
      : `Events per ${query.interval} (UTC), ${query.date_from} to ${query.date_to}: ${data.series.length} buckets.`;

  const shown = new URLSearchParams({ workspace_id: workspaceId, ...query, campaign_id: query.campaign_id ?? '' });
  ui.main.dataset.query = shown.toString();
  if (performance.getEntriesByName(FIRST_VIEW_MARK).length === 0) performance.mark(FIRST_VIEW_MARK);
  setStatus(
    'ready',
    `Showing ${query.date_from} to ${query.date_to} per ${query.interval}, as of ${new Date().toISOString().slice(11, 19)} UTC.`,
  );
}

function onFailure(error: unknown): void {
  if (isAbort(error)) return;
  showError(error);
  setStatus('error');
}

ui.authForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const token = ui.token.value.trim().replace(/^Bearer\s+/i, '');
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  ui.token.value = '';
  campaignsByWorkspace.clear();
  signIn().catch(onFailure);
});

ui.signOut.addEventListener('click', () => {
  inFlight?.abort();
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(WORKSPACE_KEY);
  campaignsByWorkspace.clear();
  fillWorkspaces([]);
  ui.user.textContent = 'Signed out';
  clearError();
  setStatus('idle');
});

ui.workspace.addEventListener('change', () => {
  loadWorkspace().catch(onFailure);
});
for (const input of [ui.from, ui.to, ui.interval, ui.campaign]) {
  input.addEventListener('change', () => {
    loadStats().catch(onFailure);
  });
}
ui.filters.addEventListener('submit', (event) => {
  event.preventDefault();
  loadStats().catch(onFailure);
});

ui.from.value = utcDate(DEFAULT_DAYS - 1);
ui.to.value = utcDate(0);
ui.token.placeholder = sessionStorage.getItem(TOKEN_KEY) ? 'a token is stored for this tab' : ui.token.placeholder;
signIn().catch(onFailure);
