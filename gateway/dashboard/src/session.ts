import { UserManager, WebStorageStateStore, type User } from 'oidc-client-ts';
import type { DashboardSettings } from './api';

/**
 * Who the page calls the API as. With a client id (GET /dashboard/config.json)
 * it signs in with OpenID Connect against the issuer's discovery document:
 * authorization code with PKCE, the tokens kept in this tab's
 * sessionStorage, renewed before they expire (refresh token, else a silent
 * request), signed out through the provider's end-session endpoint when it has
 * one. In development (or without a client id) a pasted token also works.
 */

const PASTED_TOKEN_KEY = 'mail-dashboard.token';
/** Where the provider sends the browser back: the page itself. */
const pageUrl = (): string => `${location.origin}/dashboard/`;

export class Session {
  private user: User | null = null;
  private readonly manager: UserManager | undefined;

  constructor(
    readonly settings: DashboardSettings,
    private readonly onChange: () => void,
  ) {
    if (!settings.issuer || !settings.client_id) return;
    this.manager = new UserManager({
      authority: settings.issuer,
      client_id: settings.client_id,
      redirect_uri: pageUrl(),
      post_logout_redirect_uri: pageUrl(),
      silent_redirect_uri: pageUrl(),
      response_type: 'code',
      scope: settings.scopes,
      extraQueryParams: settings.extra_params,
      userStore: new WebStorageStateStore({ store: sessionStorage }),
      automaticSilentRenew: true,
      accessTokenExpiringNotificationTimeInSeconds: 30,
    });
    this.manager.events.addUserLoaded((user) => {
      this.user = user;
      this.onChange();
    });
    this.manager.events.addUserUnloaded(() => {
      this.user = null;
      this.onChange();
    });
    this.manager.events.addSilentRenewError(() => {
      this.onChange();
    });
  }

  /** Whether the page signs in through the identity provider. */
  get usesProvider(): boolean {
    return this.manager !== undefined;
  }

  /** The page loaded in the hidden frame of a silent renewal: hands the answer to the page that opened it. */
  static isSilentRenewalFrame(): boolean {
    return window.parent !== window && new URLSearchParams(location.search).has('state');
  }

  async finishSilentRenewal(): Promise<void> {
    await this.manager?.signinSilentCallback();
  }

  /** Finishes a sign-in the provider sent the browser back from, else picks up this tab's session. */
  async start(): Promise<void> {
    if (!this.manager) return;
    const params = new URLSearchParams(location.search);
    if (params.has('state') && (params.has('code') || params.has('error'))) {
      try {
        this.user = await this.manager.signinRedirectCallback();
      } finally {
        history.replaceState(null, '', pageUrl());
      }
    } else {
      this.user = await this.manager.getUser();
      if (this.user?.expired) this.user = await this.manager.signinSilent().catch(() => null);
    }
  }

  /** The bearer token for the API, '' without one. */
  token(): string {
    if (this.user && !this.user.expired) return this.user.access_token;
    return this.settings.token_paste ? (sessionStorage.getItem(PASTED_TOKEN_KEY) ?? '') : '';
  }

  get signedIn(): boolean {
    return this.user !== null && !this.user.expired;
  }

  /** When the current access token expires (unix seconds), for tests and the status line. */
  get expiresAt(): number | undefined {
    return this.user?.expires_at;
  }

  signIn(): Promise<void> {
    if (!this.manager) throw new Error('No identity provider is configured for the dashboard');
    return this.manager.signinRedirect();
  }

  paste(token: string): void {
    if (token) sessionStorage.setItem(PASTED_TOKEN_KEY, token);
    else sessionStorage.removeItem(PASTED_TOKEN_KEY);
  }

  /** Ends the session here, and at the provider when it has an end-session endpoint (the browser then leaves and comes back). */
  async signOut(): Promise<void> {
    sessionStorage.removeItem(PASTED_TOKEN_KEY);
    if (!this.manager) return;
    const endSession = await this.manager.metadataService.getEndSessionEndpoint().catch(() => undefined);
    const idToken = this.user?.id_token;
    await this.manager.removeUser();
    this.user = null;
    if (endSession) await this.manager.signoutRedirect({ id_token_hint: idToken });
  }
}
