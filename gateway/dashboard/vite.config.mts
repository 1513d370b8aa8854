import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { defineConfig, type Plugin } from 'vite';

/**
 * The analytics dashboard: one page served by the gateway at /dashboard, its
 * hashed files at /dashboard/assets/ (see gateway/src/routes/dashboard.ts).
 * Everything is bundled: the page makes no request except to the API.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  logLevel: 'warn',
  plugins: [precompress()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    // One entry, no lazy chunks: the preload polyfill would only add bytes.
    modulePreload: { polyfill: false },
  },
});

/** Writes `<file>.gz` beside each text file, so the gateway sends gzip without compressing per request. */
function precompress(): Plugin {
  return {
    name: 'dashboard-precompress',
    apply: 'build',
    writeBundle(options) {
      const walk = (dir: string): string[] =>
        fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
          const full = path.join(dir, entry.name);
          return entry.isDirectory() ? walk(full) : [full];
        });
      for (const file of walk(options.dir!)) {
        if (/\.(html|js|css|svg|json)$/.test(file)) fs.writeFileSync(`${file}.gz`, gzipSync(fs.readFileSync(file), { level: 9 }));
      }
    },
  };
}
