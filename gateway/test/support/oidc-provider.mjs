// An OpenID Connect provider for the dashboard's sign-in test: the real
// `oidc-provider` package (ESM-only, hence a child process of the test) on
// loopback, with its own login and consent pages (devInteractions: any
// password), one public client and the test's accounts. Access tokens are
// JWTs for the API's audience (resource indicators), carrying the account's
// e-mail (which the gateway requires) and name. Settings come from the environment; it
// prints `ready <issuer>` once it listens.
import crypto from 'node:crypto';
import Provider from 'oidc-provider';

const { PORT, CLIENT_ID, REDIRECT_URI, AUDIENCE, ACCESS_TOKEN_TTL, ACCOUNTS } = process.env;
const issuer = `http://127.0.0.1:${PORT}`;
/** login -> { email, name }. */
const accounts = JSON.parse(ACCOUNTS);
const signingKey = {
  ...crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
  kid: 'test-rs256',
  alg: 'RS256',
  use: 'sig',
};
const ttl = Number(ACCESS_TOKEN_TTL);

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: CLIENT_ID,
      token_endpoint_auth_method: 'none',
      application_type: 'web',
      redirect_uris: [REDIRECT_URI],
      post_logout_redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(16).toString('hex')] },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  scopes: ['openid', 'profile', 'email', 'offline_access'],
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => AUDIENCE,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({ scope: 'openid profile email', audience: AUDIENCE, accessTokenTTL: ttl, accessTokenFormat: 'jwt' }),
    },
  },
  pkce: { required: () => true },
  issueRefreshToken: () => true,
  ttl: { AccessToken: ttl, IdToken: ttl, RefreshToken: 3600, Interaction: 600, Session: 3600, Grant: 3600 },
  findAccount: (_ctx, id) =>
    accounts[id] && {
      accountId: id,
      claims: () => ({ sub: id, email: accounts[id].email, email_verified: true, name: accounts[id].name }),
    },
  extraTokenClaims: (_ctx, token) =>
    token.kind === 'AccessToken' && accounts[token.accountId] ? { ...accounts[token.accountId] } : undefined,
});
provider.listen(Number(PORT), '127.0.0.1', () => console.log(`ready ${issuer}`));
