import { trackingTokenSigner, type TrackingClaims } from '@mail/common/tracking-token';
import { serveWorker } from '@mail/common/worker-pool';
import { compileTemplate, messageSizeProblem, renderMessage, type CompiledTemplate, type RenderedMessage } from '../domain/render';
import { addTracking } from '../domain/tracking';
import type { RenderBatch, RenderOutcome, RenderTracking } from './renderer';

/** A run's templates, compiled once per worker; a worker that is replaced compiles them again. */
const compiled = new Map<string, Map<string, CompiledTemplate>>();

function templatesOf(batch: RenderBatch): Map<string, CompiledTemplate> {
  const cached = batch.cacheKey === undefined ? undefined : compiled.get(batch.cacheKey);
  if (cached) return cached;
  const templates = new Map(Object.entries(batch.templates).map(([key, content]) => [key, compileTemplate(content)]));
  if (batch.cacheKey !== undefined) {
    if (compiled.size >= 100) compiled.clear();
    compiled.set(batch.cacheKey, templates);
  }
  return templates;
}

/** The HTML part with its links and open pixel tracked: after rendering, inside the message's time and size bounds. */
function tracked(rendered: RenderedMessage, unsubscribeUrl: string, tracking: RenderTracking, claims: TrackingClaims): RenderedMessage {
  if (rendered.html === undefined) return rendered;
  const signer = trackingTokenSigner(tracking.signingKey, claims);
  return {
    ...rendered,
    html: addTracking(rendered.html, {
      unsubscribeUrl,
      openUrl: tracking.opens ? `${tracking.baseUrl}/t/o/${signer.open()}` : undefined,
      clickUrl: tracking.clicks ? (url) => `${tracking.baseUrl}/t/c/${signer.click(url)}` : undefined,
    }),
  };
}

function renderOne(
  templates: Map<string, CompiledTemplate>,
  message: RenderBatch['messages'][number],
  tracking: RenderTracking | undefined,
): RenderOutcome {
  const template = templates.get(message.key);
  if (!template) return { error: `The template could not be rendered: the run has no template for variant ${message.key}` };
  try {
    const plain = renderMessage(template, message.fields, message.unsubscribeUrl);
    const rendered = tracking && message.tracking ? tracked(plain, message.unsubscribeUrl, tracking, message.tracking) : plain;
    const tooBig = messageSizeProblem(rendered);
    return tooBig ? { error: tooBig } : { message: rendered };
  } catch (error) {
    return { error: `The template could not be rendered: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** Each message's outcome is reported as soon as it is rendered: the watchdog's clock restarts with each. */
serveWorker((batch: RenderBatch, report) => {
  const templates = templatesOf(batch);
  for (const message of batch.messages) report(renderOne(templates, message, batch.tracking));
  return null;
});
