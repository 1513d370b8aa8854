/** The header dialects of SMTP_PROVIDER (docs/api.md, "Campaign runs"). */
export const PROVIDERS = ['none', 'sendgrid', 'mailgun', 'ses', 'postmark'] as const;
export type Provider = (typeof PROVIDERS)[number];

/** What the provider's events must carry back so that they find their campaign and variant. */
export interface Tracking {
  category: string | null;
  variantId: string | null;
  runId: string;
  messageId: string;
}

/** SES message tags allow letters, digits, `_`, `-`, `.` and `@` only. */
const sesValue = (value: string): string => value.replace(/[^A-Za-z0-9_\-.@]/g, '_');

/** The provider's own headers that carry the category or tag and the variables of a message. */
export function providerHeaders(provider: Provider, tracking: Tracking): Record<string, string> {
  const variables: Record<string, string> = { run_id: tracking.runId, message_id: tracking.messageId };
  if (tracking.variantId !== null) variables.variant_id = tracking.variantId;
  switch (provider) {
    case 'none':
      return {};
    case 'sendgrid':
      return {
        'X-SMTPAPI': JSON.stringify({ ...(tracking.category === null ? {} : { category: [tracking.category] }), unique_args: variables }),
      };
    case 'mailgun':
      return {
        ...(tracking.category === null ? {} : { 'X-Mailgun-Tag': tracking.category }),
        'X-Mailgun-Variables': JSON.stringify(variables),
      };
    case 'ses': {
      const tags = { ...(tracking.category === null ? {} : { category: tracking.category }), ...variables };
      return {
        'X-SES-MESSAGE-TAGS': Object.entries(tags)
          .map(([name, value]) => `${name}=${sesValue(value)}`)
          .join(', '),
      };
    }
    case 'postmark':
      return {
        ...(tracking.category === null ? {} : { 'X-PM-Tag': tracking.category }),
        ...Object.fromEntries(Object.entries(variables).map(([name, value]) => [`X-PM-Metadata-${name}`, value])),
      };
  }
}
