import './style.css';
import { Api, ApiError, type CampaignSummary, type Me, type StatsQuery } from './api';
import { SeriesChart } from './chart';
import { byId } from './dom';
import { utcDate } from './format';
import { renderCampaigns, renderFunnel, renderLinks, renderSeriesTable, renderSuppressions, renderTotals, renderVariants } from './render';
import { Session } from './session';
import { RunsView } from './runs';
import { LookupView, SuppressionsView } from './suppressions';
import { WorkspaceView } from './workspace';

/**
 * The analytics dashboard. It signs in through the identity provider
 * (session.ts), or in development takes a pasted token, kept in this tab's
 * sessionStorage; tokens go only to this origin's API. `data-status` (idle |
 * loading | ready | error) and `data-query` on <main> tell tests and scripts
 * what is on screen; `data-view` on <body> which view is shown.
 */

const WORKSPACE_KEY = 'mail-dashboard.workspace';
const DEFAULT_DAYS = 7;
/** A performance mark: the first statistics on screen, measured from navigation start. */
const FIRST_VIEW_MARK = 'dashboard-first-view';

const ui = {
  oidcSignIn: byId<HTMLButtonElement>('oidc-sign-in'),
  oidcSignOut: byId<HTMLButtonElement>('oidc-sign-out'),
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

let session: Session | undefined;
const api = new Api(() => session?.token() ?? '');
/** The signed-in user, for the role in the chosen workspace. */
let me: Me | undefined;
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
      ? session?.settings.token_paste === false
        ? ' Sign in again.'
        : ' Paste a valid token above and sign in.'
      : error instanceof ApiError && error.status === 403
        ? ' Your role does not allow this in the chosen workspace.'
        : '';
  ui.error.textContent = message + hint;
  ui.error.hidden = false;
  if (error instanceof ApiError && error.status === 401) {
    ui.oidcSignIn.hidden = !session?.usesProvider;
    ui.token.focus();
  }
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
  try {
    me = await api.me(signal);
  } catch (error) {
    if (isAbort(error)) return;
    me = undefined;
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
  await Promise.all([
    loadStats(),
    currentView() === 'suppressions' ? suppressions.load() : Promise.resolve(),
    currentView() === 'runs' ? runs.load() : Promise.resolve(),
    currentView() === 'workspace' && isAdmin() ? workspace.load() : Promise.resolve(),
  ]);
  byId('nav-workspace').hidden = !isAdmin();
}

const roleHere = (): string | undefined => me?.memberships.find((m) => m.workspace_id === ui.workspace.value)?.role;

/** The workspace page is for its admins (where their recipients come from) and platform admins (who set it). */
function isAdmin(): boolean {
  const role = roleHere();
  return role === 'admin' || role === 'platform_admin';
}

/** Editors and above change suppressions and start, pause, resume and cancel runs; a viewer sees none of the buttons. */
function canEdit(): boolean {
  const role = me?.memberships.find((m) => m.workspace_id === ui.workspace.value)?.role;
  return role !== undefined && role !== 'viewer';
}

async function campaignName(workspaceId: string, id: string): Promise<string> {
  const campaigns = await campaignsOf(workspaceId).catch((): CampaignSummary[] => []);
  return campaigns.find((c) => c.id === id)?.name ?? id;
}

type View = 'stats' | 'suppressions' | 'lookup' | 'runs' | 'workspace';

function currentView(): View {
  const view = location.hash.slice(1);
  return view === 'suppressions' || view === 'lookup' || view === 'runs' || view === 'workspace' ? view : 'stats';
}

function showView(): void {
  const view = currentView();
  document.body.dataset.view = view;
  ui.main.hidden = view !== 'stats';
  byId('suppressions-view').hidden = view !== 'suppressions';
  byId('lookup-view').hidden = view !== 'lookup';
  byId('runs-view').hidden = view !== 'runs';
  byId('workspace-view').hidden = view !== 'workspace';
  for (const link of document.querySelectorAll<HTMLAnchorElement>('nav.views a')) {
    if (link.dataset.view === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (view === 'suppressions' && me) void suppressions.load();
  if (view === 'workspace' && me && isAdmin()) void workspace.load();
  if (view === 'runs' && me) void runs.load();
  else runs.stop();
}

const context = { api, workspaceId: () => ui.workspace.value, canEdit, lookUp: (email: string) => void openLookup(email) };
const suppressions = new SuppressionsView(context);
const lookup = new LookupView(context, campaignName);
const runs = new RunsView(context);
const workspace = new WorkspaceView(context, () => roleHere() === 'platform_admin');

async function openLookup(email: string): Promise<void> {
  location.hash = 'lookup';
  await lookup.show(email);
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
  session?.paste(ui.token.value.trim().replace(/^Bearer\s+/i, ''));
  ui.token.value = '';
  campaignsByWorkspace.clear();
  signIn().catch(onFailure);
});

async function signOut(): Promise<void> {
  inFlight?.abort();
  sessionStorage.removeItem(WORKSPACE_KEY);
  campaignsByWorkspace.clear();
  me = undefined;
  fillWorkspaces([]);
  ui.user.textContent = 'Signed out';
  clearError();
  setStatus('idle');
  showSessionControls();
  await session?.signOut();
}

ui.signOut.addEventListener('click', () => void signOut().catch(onFailure));
ui.oidcSignOut.addEventListener('click', () => void signOut().catch(onFailure));
ui.oidcSignIn.addEventListener('click', () => void session?.signIn().catch(onFailure));
window.addEventListener('hashchange', showView);

ui.workspace.addEventListener('change', () => void loadWorkspace().catch(onFailure));
for (const input of [ui.from, ui.to, ui.interval, ui.campaign]) {
  input.addEventListener('change', () => void loadStats().catch(onFailure));
}
ui.filters.addEventListener('submit', (event) => {
  event.preventDefault();
  loadStats().catch(onFailure);
});

/** The sign-in controls the settings allow: the provider's buttons, the token form in development. */
function showSessionControls(): void {
  const provider = session?.usesProvider ?? false;
  ui.oidcSignIn.hidden = !provider || session!.signedIn;
  ui.oidcSignOut.hidden = !provider || !session!.signedIn;
  ui.authForm.hidden = !(session?.settings.token_paste ?? false);
  document.body.dataset.tokenExpiresAt = String(session?.expiresAt ?? '');
}

async function start(): Promise<void> {
  if (Session.isSilentRenewalFrame()) {
    await new Session(await Api.settings(), () => undefined).finishSilentRenewal();
    return;
  }
  ui.from.value = utcDate(DEFAULT_DAYS - 1);
  ui.to.value = utcDate(0);
  showView();
  session = new Session(await Api.settings(), showSessionControls);
  await session.start();
  showSessionControls();
  if (session.usesProvider && !session.signedIn && !session.settings.token_paste) {
    ui.user.textContent = 'Not signed in';
    setStatus('idle', 'Sign in to see your workspaces.');
    return;
  }
  await signIn();
  showView();
}

start().catch(onFailure);
