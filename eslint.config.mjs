// ESLint over the library, the demo, the tests, the scripts and the benchmark (formatting is Prettier's).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      'coverage/**',
      'reports/**',
      '.stryker-tmp/**',
      'libs/idempotency/api/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: {
      globals: {
        console: 'readonly',
        process: 'readonly',
        Buffer: 'readonly',
        __dirname: 'readonly',
        require: 'readonly',
        module: 'writable',
        globalThis: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        performance: 'readonly',
        fetch: 'readonly',
        URL: 'readonly',
        AbortController: 'readonly',
        structuredClone: 'readonly',
        FormData: 'readonly',
        Blob: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
      // Request and response objects of Express, Fastify and GraphQL drivers are typed `any` where the module reads them.
      '@typescript-eslint/no-explicit-any': 'off',
      // Nest's reflection takes and hands out handlers and classes as `Function` (metadata keys, WeakMap keys).
      '@typescript-eslint/no-unsafe-function-type': 'off',
    },
  },
  {
    // A library file past 300 lines has grown past its job: split it by concept (CONTRIBUTING.md).
    files: ['libs/idempotency/src/**/*.ts'],
    ignores: ['**/*.spec.ts'],
    rules: { 'max-lines': ['error', { max: 300 }] },
  },
  {
    files: ['**/*.cjs', 'jest*.config.js', 'scripts/**/*.cjs', 'test/support/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
