import { templateEnvironment } from '@mail/common/handlebars';

export interface TemplateContent {
  subject: string;
  html: string | null;
  text: string | null;
}

export interface RenderedMessage {
  subject: string;
  html?: string;
  text?: string;
}

type Render = (fields: Record<string, unknown>) => string;

/** A template compiled once per run: HTML-escaped values in `html`, as given in `subject` and `text`. */
export interface CompiledTemplate {
  subject: Render;
  html?: Render;
  text?: Render;
}

/** Every template renders in this environment: the built-in helpers less `log`, and no partials. */
const handlebars = templateEnvironment();

/** A message's size limit, subject and bodies together, in UTF-8 bytes. */
export const MESSAGE_MAX_BYTES = 2 * 1024 * 1024;

export function compileTemplate(content: TemplateContent): CompiledTemplate {
  const compile = (source: string, noEscape: boolean): Render => {
    const template = handlebars.compile(source, { noEscape, strict: false });
    return (fields) => template(fields);
  };
  return {
    subject: compile(content.subject, true),
    html: content.html === null ? undefined : compile(content.html, false),
    text: content.text === null ? undefined : compile(content.text, true),
  };
}

/**
 * The recipient's fields, with `unsubscribe_url` (the one-click link, also in
 * List-Unsubscribe) beside them. A subject keeps to one line.
 */
export function renderMessage(template: CompiledTemplate, fields: Record<string, unknown>, unsubscribeUrl: string): RenderedMessage {
  const values = { ...fields, unsubscribe_url: unsubscribeUrl };
  return {
    subject: template.subject(values).replace(/[\r\n]+/g, ' '),
    html: template.html?.(values),
    text: template.text?.(values),
  };
}

/** Why a rendered message is too big to send, or undefined. */
export function messageSizeProblem(message: RenderedMessage): string | undefined {
  const bytes = [message.subject, message.html, message.text].reduce((sum, part) => sum + (part ? Buffer.byteLength(part) : 0), 0);
  return bytes > MESSAGE_MAX_BYTES ? `The message rendered to more than ${MESSAGE_MAX_BYTES / (1024 * 1024)} MB` : undefined;
}
