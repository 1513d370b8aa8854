import type { ProviderDeclaration } from '../declaration';
import { mailgun } from './mailgun';
import { postmark } from './postmark';
import { sendgrid } from './sendgrid';
import { ses } from './ses';

/** Every webhook provider, in the order docs and deployment files list them (docs/adding-a-provider.md). */
export const PROVIDERS: readonly ProviderDeclaration[] = [sendgrid, mailgun, ses, postmark];
