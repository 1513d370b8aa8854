// Lint for the whole repository: typescript-eslint's type-aware rules, with
// formatting left to Prettier (.prettierrc.json). `npm run lint` runs both.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['**/node_modules/', '**/dist/', '.state/', 'proto/src/gen/', 'bench/results/', 'coverage/', 'test-output/'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    files: ['**/*.ts', '**/*.mts'],
    languageOptions: {
      parserOptions: {
        // The packages' own projects, then the tests' (tsconfig.test.json) for the files no package includes.
        project: [
          './*/tsconfig.json',
          './services/*/tsconfig.json',
          './deploy/local/tsconfig.json',
          './gateway/dashboard/tsconfig.json',
          './tsconfig.test.json',
        ],
        tsconfigRootDir: import.meta.dirname,
      },
    },
  },
  {
    rules: {
      // A leading underscore marks a parameter or binding kept for its position or to leave it out of a rest.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // Tests read HTTP and JSON bodies, which are `any` by nature; their assertions are the type check.
    files: ['**/test/**/*.ts', 'deploy/cluster-test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    // Merged into disableTypeChecked's own rules and options, which a plain key here would replace.
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { module: 'readonly', require: 'readonly', process: 'readonly', console: 'readonly', __dirname: 'readonly' },
    },
  },
  prettier,
);
