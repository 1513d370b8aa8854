import fs from 'node:fs';
import path from 'node:path';
import { Router, type Request, type Response } from 'express';
import type { DashboardConfig } from '../config';
import { HttpError, notFound } from '../errors/http-error';

/**
 * The analytics dashboard page (gateway/dashboard, built by `npm run build`
 * into gateway/dashboard/dist). Public: the page holds no secret and calls the
 * API with the user's own token. Mounted before authentication.
 */
const DASHBOARD_DIST = path.resolve(__dirname, '..', '..', 'dashboard', 'dist');

/** Vite's hashed output names: a file never changes under its name. */
const ASSET_NAME = /^[\w.-]+\.[a-z0-9]+$/i;
const YEAR_SECONDS = 365 * 24 * 3600;

const NO_SIGN_IN: DashboardConfig = { scopes: 'openid profile email', extraParams: {}, tokenPaste: true };

/**
 * Only this origin's files and API; no inline code. Signing in through an
 * identity provider adds its origin for the page's calls (discovery, token,
 * renewal) and for the hidden frame of a silent renewal, which comes back to
 * the page inside this origin's own frame.
 */
function pageSecurityHeaders(issuerOrigin: string | undefined): Record<string, string> {
  return {
    'Content-Security-Policy': [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data:",
      `connect-src 'self'${issuerOrigin ? ` ${issuerOrigin}` : ''}`,
      ...(issuerOrigin ? [`frame-src 'self' ${issuerOrigin}`] : []),
      "base-uri 'none'",
      "form-action 'none'",
      `frame-ancestors ${issuerOrigin ? "'self'" : "'none'"}`,
    ].join('; '),
    'Referrer-Policy': 'no-referrer',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': issuerOrigin ? 'SAMEORIGIN' : 'DENY',
  };
}

export function dashboardRouter(distDir: string = DASHBOARD_DIST, settings: DashboardConfig = NO_SIGN_IN): Router {
  const router = Router();
  const signsIn = settings.clientId !== undefined && settings.issuer !== undefined;
  const headers = pageSecurityHeaders(signsIn ? new URL(settings.issuer!).origin : undefined);

  router.get(['/dashboard', '/dashboard/', '/dashboard/index.html'], (req, res, next) => {
    // Revalidated on every load (ETag), so a new build shows at once.
    sendMaybeGzipped(req, res, path.join(distDir, 'index.html'), { ...headers, 'Cache-Control': 'no-cache' }).catch(next);
  });

  // The page's sign-in settings: public values only (a public client has no secret).
  router.get('/dashboard/config.json', (_req, res) => {
    res.set('Cache-Control', 'no-cache').json({
      issuer: signsIn ? settings.issuer : null,
      client_id: signsIn ? settings.clientId : null,
      scopes: settings.scopes,
      extra_params: settings.extraParams,
      token_paste: settings.tokenPaste,
    });
  });

  router.get('/dashboard/assets/:name', (req, res, next) => {
    const name = req.params.name;
    if (!ASSET_NAME.test(name) || name.endsWith('.gz')) return next(notFound());
    sendMaybeGzipped(req, res, path.join(distDir, 'assets', name), {
      'X-Content-Type-Options': 'nosniff',
      'Cache-Control': `public, max-age=${YEAR_SECONDS}, immutable`,
    }).catch(next);
  });

  return router;
}

/** Sends `<file>.gz` (written by the build) to clients that accept gzip, else the file itself. */
async function sendMaybeGzipped(req: Request, res: Response, file: string, headers: Record<string, string>): Promise<void> {
  const gzipped = `${file}.gz`;
  const useGzip = req.acceptsEncodings('gzip', 'identity') === 'gzip' && (await exists(gzipped));
  if (!useGzip && !(await exists(file))) {
    throw file.endsWith('index.html') ? new HttpError(503, 'The dashboard is not built: run `npm run build`') : notFound();
  }
  res.set(headers);
  res.vary('Accept-Encoding');
  res.type(path.extname(file));
  if (useGzip) res.set('Content-Encoding', 'gzip');
  await new Promise<void>((resolve, reject) => {
    // Cache-Control is ours (set above); send() would otherwise replace it.
    res.sendFile(useGzip ? gzipped : file, { cacheControl: false, dotfiles: 'deny' }, (error) =>
      error && !res.headersSent ? reject(error) : resolve(),
    );
  });
}

async function exists(file: string): Promise<boolean> {
  try {
    return (await fs.promises.stat(file)).isFile();
  } catch {
    return false;
  }
}
