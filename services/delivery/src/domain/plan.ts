import { AB_TEST_DEFAULTS, InvalidArgumentError, valueError } from '@mail/common';
import { campaignV1 } from '@mail/proto';
import type { AbMetric, AbTestPlan } from './ab-test';
import type { TemplateContent } from './render';

export const ENGAGEMENTS = ['not_opened', 'not_clicked', 'opened', 'clicked'] as const;
export type Engagement = (typeof ENGAGEMENTS)[number];

/** A follow-up run's recipients: the sent recipients of an earlier run of the workspace who did, or did not, engage. */
export interface Audience {
  runId: string;
  engagement: Engagement;
}

export interface PlanVariant {
  id: string;
  label: string | null;
  weight: number;
}

/**
 * What a run sends, fixed when the run is created: the campaign's sender,
 * recipient source and templates at that moment. Later edits of the campaign
 * or its templates do not change a run under way (nor its resumption).
 */
export interface RunPlan {
  fromEmail: string;
  fromName: string | null;
  replyTo: string | null;
  providerCategoryId: string | null;
  sendPriority: number;
  /** An audience reads the earlier run's ledger, with the human events stored until `asOf` (the run's creation). */
  source: { kind: 'query'; sql: string } | { kind: 'accounts'; ids: string[] } | ({ kind: 'audience'; asOf: string } & Audience);
  /** Active variants with a weight (variants mode), or null (single template). */
  variants: PlanVariant[] | null;
  /** By variant id; the single template under SINGLE_TEMPLATE. */
  templates: Record<string, TemplateContent>;
  /** The campaign's track_opens and track_clicks; absent in plans stored before them and in test sends: no tracking. */
  tracking?: { opens: boolean; clicks: boolean };
  /** The A/B test of a variants campaign that has one, else null (absent in plans stored before it existed). */
  abTest?: AbTestPlan | null;
}

/**
 * What a sender needs of a run's plan: all of it but the recipient source,
 * which only the loader reads. A csv_account_ids list can be a megabyte, and
 * the senders read their runs' plans again for every batch.
 */
export type SendingPlan = Omit<RunPlan, 'source'>;

export const SINGLE_TEMPLATE = 'single';

/** A template of the workspace, or undefined when the id names none. */
export type TemplateLookup = (templateId: string) => Promise<TemplateContent | undefined>;

export type PlanResult = { plan: RunPlan } | { missing: string[] };

/**
 * The run plan of a campaign, or every piece it lacks to be sent (the 409's
 * and a failed scheduled run's reason).
 */
export async function planRun(campaign: campaignV1.Campaign, lookup: TemplateLookup, audience?: Audience): Promise<PlanResult> {
  const missing: string[] = [];
  if (!campaign.fromEmail) missing.push('from_email is not set');

  let source: RunPlan['source'] | undefined;
  if (audience) {
    source = { kind: 'audience', ...audience, asOf: new Date().toISOString() };
  } else if (campaign.recipientSource === campaignV1.RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY) {
    if (campaign.mssqlQuery) source = { kind: 'query', sql: campaign.mssqlQuery };
    else missing.push('mssql_query is not set (recipient_source is mssql_query)');
  } else if (campaign.csvAccountIds?.ids.length) {
    source = { kind: 'accounts', ids: campaign.csvAccountIds.ids };
  } else {
    missing.push('csv_account_ids is not set (recipient_source is csv_account_ids)');
  }

  const wanted: [string, string][] = [];
  let variants: PlanVariant[] | null = null;
  let abTest: AbTestPlan | null = null;
  if (campaign.deliveryMode === campaignV1.DeliveryMode.DELIVERY_MODE_VARIANTS) {
    if (campaign.abTest) abTest = abTestPlan(campaign.abTest);
    const active = (campaign.variants?.variants ?? []).filter((variant) => variant.isActive && variant.weight > 0);
    if (active.length === 0) missing.push('no active variant with a weight above 0 (delivery_mode is variants)');
    variants = active.map((variant) => ({ id: variant.id, label: variant.label ?? null, weight: variant.weight }));
    for (const variant of active) wanted.push([variant.id, variant.templateId]);
  } else if (campaign.templateId) {
    wanted.push([SINGLE_TEMPLATE, campaign.templateId]);
  } else {
    missing.push('template_id is not set');
  }

  const templates: Record<string, TemplateContent> = {};
  const found = await Promise.all(wanted.map(async ([key, templateId]) => [key, templateId, await lookup(templateId)] as const));
  for (const [key, templateId, template] of found) {
    if (template) templates[key] = template;
    else missing.push(`template_id ${templateId} names no template of the workspace`);
  }

  if (missing.length > 0 || !source) return { missing: [...new Set(missing)] };
  return {
    plan: {
      fromEmail: campaign.fromEmail ?? '',
      fromName: campaign.fromName ?? null,
      replyTo: campaign.replyTo ?? null,
      providerCategoryId: campaign.providerCategoryId ?? null,
      sendPriority: campaign.sendPriority,
      source,
      variants,
      templates,
      tracking: { opens: campaign.trackOpens, clicks: campaign.trackClicks },
      abTest,
    },
  };
}

function abTestPlan(settings: campaignV1.AbTest): AbTestPlan {
  return {
    testFraction: settings.testFraction ?? AB_TEST_DEFAULTS.test_fraction,
    waitMinutes: settings.waitMinutes ?? AB_TEST_DEFAULTS.wait_minutes,
    metric: (settings.metric as AbMetric | undefined) ?? AB_TEST_DEFAULTS.metric,
  };
}

export const cannotSend = (missing: string[]): string => `The campaign cannot be sent: ${missing.join('; ')}`;

/**
 * The plan of a test send: the campaign's sender and one template, that of
 * `variantId` (any variant of the campaign) or, in variants mode without one,
 * of the first active variant. Recipients do not matter.
 */
export async function planTestSend(
  campaign: campaignV1.Campaign,
  lookup: TemplateLookup,
  variantId: string | undefined,
): Promise<PlanResult> {
  const missing: string[] = [];
  if (!campaign.fromEmail) missing.push('from_email is not set');
  const variants = campaign.variants?.variants ?? [];
  let chosen: { key: string; templateId: string } | undefined;
  if (variantId !== undefined) {
    const variant = variants.find((candidate) => candidate.id === variantId.toLowerCase());
    if (!variant) throw new InvalidArgumentError([valueError(['variant_id'], variantId, 'not a variant of this campaign')]);
    chosen = { key: variant.id, templateId: variant.templateId };
  } else if (campaign.deliveryMode === campaignV1.DeliveryMode.DELIVERY_MODE_VARIANTS) {
    const active = variants.find((variant) => variant.isActive);
    if (active) chosen = { key: active.id, templateId: active.templateId };
    else missing.push('no active variant (delivery_mode is variants)');
  } else if (campaign.templateId) {
    chosen = { key: SINGLE_TEMPLATE, templateId: campaign.templateId };
  } else {
    missing.push('template_id is not set');
  }
  const template = chosen && (await lookup(chosen.templateId));
  if (chosen && !template) missing.push(`template_id ${chosen.templateId} names no template of the workspace`);
  if (missing.length > 0 || !chosen || !template) return { missing };
  return {
    plan: {
      fromEmail: campaign.fromEmail ?? '',
      fromName: campaign.fromName ?? null,
      replyTo: campaign.replyTo ?? null,
      providerCategoryId: campaign.providerCategoryId ?? null,
      sendPriority: campaign.sendPriority,
      source: { kind: 'accounts', ids: [] },
      variants: chosen.key === SINGLE_TEMPLATE ? null : [{ id: chosen.key, label: null, weight: 1 }],
      templates: { [chosen.key]: template },
    },
  };
}
