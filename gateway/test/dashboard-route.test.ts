import fs from 'node:fs';
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import express from 'express';
import { createLogger } from '@mail/common';
import { errorHandler } from '../src/errors/handler';
import { notFound } from '../src/errors/http-error';
import { dashboardRouter } from '../src/routes/dashboard';

/**
 * How the gateway serves the built dashboard (a build output written here by
 * the test): gzip negotiation, caching, revalidation, refusals. The page
 * itself is tested in a browser in dashboard.test.ts.
 */

const INDEX = '<!doctype html><title>Campaign analytics</title><script type="module" src="/dashboard/assets/index-AbC_12-x.js"></script>';
const SCRIPT = `console.log(${JSON.stringify('x'.repeat(2000))});`;

let dist: string;
let server: Server;
let base: string;

function serve(distDir: string): Promise<Server> {
  const app = express();
  app.use(dashboardRouter(distDir));
  // As in app.ts: what no route takes is a 404 in the API's format.
  app.use(() => {
    throw notFound();
  });
  app.use(errorHandler(createLogger('dashboard-route-test', 'silent')));
  return new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
}

beforeAll(async () => {
  dist = fs.mkdtempSync(path.join(os.tmpdir(), 'dashboard-dist-'));
  fs.mkdirSync(path.join(dist, 'assets'));
  fs.writeFileSync(path.join(dist, 'index.html'), INDEX);
  fs.writeFileSync(path.join(dist, 'index.html.gz'), gzipSync(INDEX));
  fs.writeFileSync(path.join(dist, 'assets', 'index-AbC_12-x.js'), SCRIPT);
  fs.writeFileSync(path.join(dist, 'assets', 'index-AbC_12-x.js.gz'), gzipSync(SCRIPT));
  fs.writeFileSync(path.join(dist, 'assets', 'plain-Z9.css'), 'body{margin:0}');
  server = await serve(dist);
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(dist, { recursive: true, force: true });
});

/** Raw bytes and headers, without fetch's automatic decompression. */
async function get(route: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }>((resolve, reject) => {
    request(`${base}${route}`, { headers, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
    })
      .on('error', reject)
      .end();
  });
}

test('the page: gzip when accepted, the file itself otherwise, revalidated on every load, locked down', async () => {
  for (const route of ['/dashboard', '/dashboard/', '/dashboard/index.html']) {
    const zipped = await get(route, { 'Accept-Encoding': 'gzip, deflate, br' });
    expect(zipped.status).toBe(200);
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(zipped.headers.vary).toBe('Accept-Encoding');
    expect(zipped.headers['cache-control']).toBe('no-cache');
    expect(zipped.headers['content-security-policy']).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(zipped.headers['x-frame-options']).toBe('DENY');
    expect(gunzipSync(zipped.body).toString()).toBe(INDEX);
  }
  const plain = await get('/dashboard');
  expect(plain.headers['content-encoding']).toBeUndefined();
  expect(plain.body.toString()).toBe(INDEX);

  const again = await get('/dashboard', { 'If-None-Match': String(plain.headers.etag) });
  expect(again.status).toBe(304);
});

test('hashed assets: cached for a year as immutable, gzip negotiated, content type of the original', async () => {
  const zipped = await get('/dashboard/assets/index-AbC_12-x.js', { 'Accept-Encoding': 'gzip' });
  expect(zipped.status).toBe(200);
  expect(zipped.headers['cache-control']).toBe('public, max-age=31536000, immutable');
  expect(zipped.headers['content-type']).toBe('text/javascript; charset=utf-8');
  expect(zipped.headers['content-encoding']).toBe('gzip');
  expect(gunzipSync(zipped.body).toString()).toBe(SCRIPT);

  const identityOnly = await get('/dashboard/assets/index-AbC_12-x.js', { 'Accept-Encoding': 'gzip;q=0, identity' });
  expect(identityOnly.headers['content-encoding']).toBeUndefined();
  expect(identityOnly.body.toString()).toBe(SCRIPT);

  // No .gz beside it: the file itself, even to a gzip client.
  const css = await get('/dashboard/assets/plain-Z9.css', { 'Accept-Encoding': 'gzip' });
  expect(css.status).toBe(200);
  expect(css.headers['content-encoding']).toBeUndefined();
  expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
  expect(css.body.toString()).toBe('body{margin:0}');
});

test('anything else under assets is a 404 in the API error format, never a file outside them', async () => {
  for (const route of [
    '/dashboard/assets/missing-1.js',
    '/dashboard/assets/index-AbC_12-x.js.gz',
    '/dashboard/assets/..%2Findex.html',
    '/dashboard/assets/..%2F..%2Fpackage.json',
    '/dashboard/assets/',
  ]) {
    const answer = await get(route);
    expect({ route, status: answer.status }).toEqual({ route, status: 404 });
    expect(JSON.parse(answer.body.toString())).toEqual({ detail: 'Not Found' });
  }
});

test('an unbuilt dashboard answers 503 with the fix, not a stack trace', async () => {
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'dashboard-empty-'));
  const unbuilt = await serve(empty);
  try {
    const answer = await fetch(`http://127.0.0.1:${(unbuilt.address() as AddressInfo).port}/dashboard`);
    expect(answer.status).toBe(503);
    expect(await answer.json()).toEqual({ detail: 'The dashboard is not built: run `npm run build`' });
  } finally {
    await new Promise((resolve) => unbuilt.close(resolve));
    fs.rmSync(empty, { recursive: true, force: true });
  }
});
