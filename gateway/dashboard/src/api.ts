/** The gateway endpoints the dashboard reads (gateway/openapi/*.yaml), same origin. */

export interface Membership {
  workspace_id: string;
  workspace_name: string;
  role: string;
}

export interface Me {
  id: string;
  email: string;
  display_name: string;
  memberships: Membership[];
}

/** Event counts are distinct provider events, unique counts exact distinct addresses; a rate is null on a zero denominator. */
export interface EngagementCounts {
  /** Handed over by our own sender (campaign runs). */
  sent: number;
  processed: number;
  delivered: number;
  deferred: number;
  dropped: number;
  hard_bounces: number;
  soft_bounces: number;
  spam_reports: number;
  unsubscribes: number;
  opens: number;
  machine_opens: number;
  unique_opens: number;
  clicks: number;
  unique_clicks: number;
  delivery_rate: number | null;
  open_rate: number | null;
  click_rate: number | null;
  click_to_open_rate: number | null;
  bounce_rate: number | null;
  unsubscribe_rate: number | null;
  spam_report_rate: number | null;
}

export type CountKey = { [K in keyof EngagementCounts]: EngagementCounts[K] extends number ? K : never }[keyof EngagementCounts];
export type RateKey = Exclude<keyof EngagementCounts, CountKey>;

export interface CampaignStats extends EngagementCounts {
  campaign_id: string;
  leader_by_open_rate: string | null;
  leader_by_click_rate: string | null;
}

export interface VariantStats extends EngagementCounts {
  campaign_id: string;
  variant_id: string;
  label: string | null;
  weight: number | null;
  is_active: boolean;
}

export interface SeriesBucket extends EngagementCounts {
  bucket_start: string;
}

export interface LinkStats {
  campaign_id: string;
  url: string;
  clicks: number;
  unique_clicks: number;
}

export interface SuppressionCounts {
  total: number;
  hard_bounce: number;
  soft_bounces: number;
  unsubscribe: number;
  spam_report: number;
}

export interface Stats {
  totals: EngagementCounts;
  campaigns: CampaignStats[];
  variants: VariantStats[];
  series: SeriesBucket[];
  top_links: LinkStats[];
  suppressions: SuppressionCounts;
}

export interface StatsQuery {
  date_from: string;
  date_to: string;
  interval: 'hour' | 'day';
  campaign_id?: string;
}

/** One page of a list: its items and where they stand in the whole. */
export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  page_size: number;
}

export type SuppressionReason = 'hard_bounce' | 'soft_bounces' | 'unsubscribe' | 'spam_report' | 'manual';

export interface Suppression {
  email: string;
  reason: SuppressionReason;
  suppressed_at: string;
}

export interface SuppressionQuery {
  q?: string;
  reason?: SuppressionReason;
  page: number;
  page_size: number;
}

export interface Actor {
  user_id: string;
  email: string;
}

export interface SuppressionDetail {
  email: string;
  suppressed: boolean;
  reason: SuppressionReason | null;
  suppressed_at: string | null;
  note: string | null;
  events: Array<{ reason: string; event_type: string; bounce_type: string | null; occurred_at: string; provider_event_id: string }>;
  additions: Array<{ added_at: string; note: string | null; added_by: Actor | null }>;
  lifts: Array<{ lifted_at: string; lifted_by: Actor | null }>;
}

export interface EngagementEvent {
  id: string;
  campaign_id: string;
  event_type: string;
  bounce_type: string | null;
  email: string;
  occurred_at: string;
  url: string | null;
  reason: string | null;
}

export interface CampaignSummary {
  id: string;
  name: string;
}

export type RunStatus = 'queued' | 'sending' | 'paused' | 'completed' | 'cancelled' | 'failed';
export type RecipientStatus = 'pending' | 'sending' | 'sent' | 'failed' | 'suppressed' | 'invalid' | 'unknown';

export interface RunCounts {
  recipients: number;
  sent: number;
  failed: number;
  suppressed: number;
  invalid: number;
  duplicates: number;
  pending: number;
  unknown: number;
}

/** Where a workspace's recipients come from (gateway/openapi/recipient-database.yaml); never a password. */
export interface RecipientDatabase {
  workspace_id: string;
  /** True: the platform's shared database, and every other field is null. */
  shared: boolean;
  kind: 'postgres' | 'mssql' | null;
  host: string | null;
  port: number | null;
  database: string | null;
  user: string | null;
  verified_at: string | null;
}

export type AbMetric = 'open_rate' | 'click_rate';

export interface AbTestSettings {
  test_fraction: number;
  wait_minutes: number;
  metric: AbMetric;
}

/** A run's A/B test (gateway/openapi/runs.yaml, CampaignRunAbTest). */
export interface RunAbTest extends AbTestSettings {
  phase: 'testing' | 'waiting' | 'sending_winner' | 'done';
  test_recipients: number;
  decide_at: string | null;
  winner_variant_id: string | null;
  decided_by: 'significance' | 'best_rate' | 'manual' | null;
  variants: Array<{ variant_id: string; sent: number; opens: number; clicks: number; rate: number | null }>;
  leader_variant_id: string | null;
}

export type Engagement = 'not_opened' | 'not_clicked' | 'opened' | 'clicked';

export interface RunAudience {
  run_id: string;
  engagement: Engagement;
}

/** A campaign run (gateway/openapi/runs.yaml). */
export interface CampaignRun {
  id: string;
  workspace_id: string;
  campaign_id: string;
  trigger: 'schedule' | 'manual';
  scheduled_for: string | null;
  status: RunStatus;
  failure: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  counts: RunCounts;
  variants: Array<{ id: string; label: string | null; weight: number; recipients: number; sent: number }> | null;
  ab_test: RunAbTest | null;
  audience: RunAudience | null;
}

export interface RunRecipient {
  email: string;
  status: RecipientStatus;
  variant_id: string | null;
  message_id: string | null;
  sent_at: string | null;
  error: string | null;
}

export type RunAction = 'pause' | 'resume' | 'cancel';

/** GET /dashboard/config.json. */
export interface DashboardSettings {
  issuer: string | null;
  client_id: string | null;
  scopes: string;
  extra_params: Record<string, string>;
  token_paste: boolean;
}

/** A non-2xx answer, or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(status === 0 ? detail : `${status} ${STATUS_TEXT[status] ?? 'Error'}: ${detail}`);
    this.name = 'ApiError';
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  422: 'Unprocessable Content',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

const PAGE_SIZE = 500;
/** A read the server was too busy for (429 or 503 with Retry-After) is asked again this many times before it fails. */
const BUSY_RETRIES = 2;
const BUSY_WAIT_MAX_MS = 10_000;

/** How long the server asked to wait before asking again, when it was busy and the wait is short enough. */
function busyWaitMs(response: Response): number | undefined {
  if (response.status !== 429 && response.status !== 503) return undefined;
  const seconds = Number(response.headers.get('Retry-After') ?? Number.NaN);
  return seconds >= 0 && seconds * 1000 <= BUSY_WAIT_MAX_MS ? seconds * 1000 : undefined;
}

/** Waits `ms`, or rejects as the fetch would once `signal` aborts. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason as Error);
      },
      { once: true },
    );
  });
}

export class Api {
  constructor(private readonly token: () => string) {}

  /** The gateway's sign-in settings for this page. */
  static async settings(): Promise<DashboardSettings> {
    const response = await fetch('/dashboard/config.json', { credentials: 'omit', cache: 'no-store' });
    if (!response.ok) throw new ApiError(response.status, 'the dashboard settings could not be read');
    return (await response.json()) as DashboardSettings;
  }

  me(signal?: AbortSignal): Promise<Me> {
    return this.get<Me>('/auth/me', undefined, {}, signal);
  }

  campaigns(workspaceId: string, signal?: AbortSignal): Promise<CampaignSummary[]> {
    return this.all<CampaignSummary>('/email-campaigns/', workspaceId, signal);
  }

  stats(workspaceId: string, query: StatsQuery, signal?: AbortSignal): Promise<Stats> {
    const params: Record<string, string> = { date_from: query.date_from, date_to: query.date_to, interval: query.interval };
    if (query.campaign_id) params.campaign_id = query.campaign_id;
    return this.get<Stats>('/campaign-events/stats', workspaceId, params, signal);
  }

  suppressions(workspaceId: string, query: SuppressionQuery, signal?: AbortSignal): Promise<Page<Suppression>> {
    return this.get<Page<Suppression>>('/suppressions/', workspaceId, suppressionParams(query), signal);
  }

  /** Every row the list's filters select, as the API's CSV. */
  async suppressionsCsv(workspaceId: string, query: Omit<SuppressionQuery, 'page' | 'page_size'>): Promise<Blob> {
    const response = await this.send('GET', '/suppressions/', workspaceId, suppressionParams(query), undefined, 'text/csv');
    return response.blob();
  }

  suppression(workspaceId: string, email: string, signal?: AbortSignal): Promise<SuppressionDetail> {
    return this.get<SuppressionDetail>(`/suppressions/${encodeURIComponent(email)}`, workspaceId, {}, signal);
  }

  async addSuppression(workspaceId: string, email: string, note: string): Promise<Suppression> {
    const response = await this.send('POST', '/suppressions/', workspaceId, {}, { email, note: note || null });
    return (await response.json()) as Suppression;
  }

  async liftSuppression(workspaceId: string, email: string): Promise<void> {
    await this.send('DELETE', `/suppressions/${encodeURIComponent(email)}`, workspaceId, {});
  }

  runs(workspaceId: string, campaignId: string, page: number, pageSize: number, signal?: AbortSignal): Promise<Page<CampaignRun>> {
    const params = { page: String(page), page_size: String(pageSize) };
    return this.get<Page<CampaignRun>>(`/email-campaigns/${encodeURIComponent(campaignId)}/runs`, workspaceId, params, signal);
  }

  async sendNow(workspaceId: string, campaignId: string): Promise<CampaignRun> {
    const response = await this.send('POST', `/email-campaigns/${encodeURIComponent(campaignId)}/runs`, workspaceId, {}, {});
    return (await response.json()) as CampaignRun;
  }

  async runAction(workspaceId: string, runId: string, action: RunAction): Promise<CampaignRun> {
    const response = await this.send('POST', `/campaign-runs/${encodeURIComponent(runId)}/${action}`, workspaceId, {}, {});
    return (await response.json()) as CampaignRun;
  }

  runRecipients(
    workspaceId: string,
    runId: string,
    query: { status?: RecipientStatus; page: number; page_size: number },
    signal?: AbortSignal,
  ): Promise<Page<RunRecipient>> {
    const params: Record<string, string> = { page: String(query.page), page_size: String(query.page_size) };
    if (query.status) params.status = query.status;
    return this.get<Page<RunRecipient>>(`/campaign-runs/${encodeURIComponent(runId)}/recipients`, workspaceId, params, signal);
  }

  recipientDatabase(workspaceId: string, signal?: AbortSignal): Promise<RecipientDatabase> {
    return this.get<RecipientDatabase>(recipientDatabasePath(workspaceId), workspaceId, {}, signal);
  }

  async putRecipientDatabase(workspaceId: string, url: string): Promise<RecipientDatabase> {
    const response = await this.send('PUT', recipientDatabasePath(workspaceId), workspaceId, {}, { url });
    return (await response.json()) as RecipientDatabase;
  }

  async deleteRecipientDatabase(workspaceId: string): Promise<void> {
    await this.send('DELETE', recipientDatabasePath(workspaceId), workspaceId, {});
  }

  /** The address's newest events (one page). */
  eventsOf(workspaceId: string, email: string, signal?: AbortSignal): Promise<Page<EngagementEvent>> {
    return this.get<Page<EngagementEvent>>('/campaign-events/', workspaceId, { email, page_size: String(PAGE_SIZE) }, signal);
  }

  /** A JSON call of a view that keeps its endpoints beside it (ab-test.ts). */
  async request<T>(method: 'GET' | 'POST' | 'PUT', path: string, workspaceId: string, body?: unknown): Promise<T> {
    const response = await this.send(method, path, workspaceId, {}, body);
    return (await response.json()) as T;
  }

  private async all<T>(path: string, workspaceId: string | undefined, signal?: AbortSignal): Promise<T[]> {
    const items: T[] = [];
    for (let page = 1; ; page++) {
      const answer = await this.get<Page<T>>(path, workspaceId, { page: String(page), page_size: String(PAGE_SIZE) }, signal);
      items.push(...answer.items);
      if (answer.items.length === 0 || items.length >= answer.total) return items;
    }
  }

  private async get<T>(path: string, workspaceId: string | undefined, params: Record<string, string>, signal?: AbortSignal): Promise<T> {
    const response = await this.send('GET', path, workspaceId, params, undefined, 'application/json', signal);
    return (await response.json()) as T;
  }

  private async send(
    method: string,
    path: string,
    workspaceId: string | undefined,
    params: Record<string, string>,
    body?: unknown,
    accept = 'application/json',
    signal?: AbortSignal,
  ): Promise<Response> {
    const headers: Record<string, string> = { Accept: accept };
    const token = this.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (workspaceId) headers.workspace_id = workspaceId;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const query = new URLSearchParams(params).toString();
    let response: Response;
    for (let attempt = 0; ; attempt++) {
      try {
        response = await fetch(query ? `${path}?${query}` : path, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal,
          credentials: 'omit',
          cache: 'no-store',
        });
      } catch (error) {
        if (signal?.aborted) throw error;
        throw new ApiError(0, 'The API cannot be reached (network error).');
      }
      const waitMs = method === 'GET' && attempt < BUSY_RETRIES ? busyWaitMs(response) : undefined;
      if (waitMs === undefined) break;
      await pause(waitMs, signal);
    }
    if (!response.ok) throw new ApiError(response.status, describeDetail(await response.json().catch(() => undefined)));
    return response;
  }
}

const recipientDatabasePath = (workspaceId: string): string => `/workspaces/${encodeURIComponent(workspaceId)}/recipient-database`;

function suppressionParams(query: Partial<SuppressionQuery>): Record<string, string> {
  const params: Record<string, string> = {};
  if (query.q) params.q = query.q;
  if (query.reason) params.reason = query.reason;
  if (query.page !== undefined) params.page = String(query.page);
  if (query.page_size !== undefined) params.page_size = String(query.page_size);
  return params;
}

/** The API's error bodies (docs/api.md): `{"detail": "..."}` or FastAPI-style validation entries. */
function describeDetail(body: unknown): string {
  const detail = (body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail.map((entry: { loc?: unknown[]; msg?: string }) => `${(entry.loc ?? []).join('.')}: ${entry.msg ?? 'invalid'}`).join('; ');
  }
  return 'no details given';
}
