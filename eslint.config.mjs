// ESLint for every workspace: typescript-eslint's type-checked recommended rules, with the
// few relaxations below, each with its reason.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'protos/src/generated/**',
      'models/generated/**',
      'gateway/static/**',
      'deploy/**/charts/**',
      'coverage/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['vitest.config.ts', 'protos/scripts/*.d.mts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // One import statement per module (type-only imports may stand apart).
      'no-duplicate-imports': ['error', { allowSeparateTypeImports: true }],
      // `_`-prefixed parameters and variables are deliberately unused (interface shapes, destructuring).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Template literals format numbers and booleans on purpose in messages.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true, allowNullish: true }],
      // grpc-js and proto-loader hand out loosely typed objects; narrowing every access would
      // add casts, not safety. Explicit `any` stays forbidden.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Async methods that implement an async interface without awaiting are deliberate: their
      // errors become rejections, as callers expect.
      '@typescript-eslint/require-await': 'off',
      // Code mirrors grpc-js's Status numbers; comparing the two is the point.
      '@typescript-eslint/no-unsafe-enum-comparison': 'off',
      // Rejecting or rethrowing an AbortSignal's reason (unknown) passes the caller's own value on.
      '@typescript-eslint/only-throw-error': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      // Interfaces declare their callbacks in method syntax (onProgress(), file()); the values
      // are arrow functions or bound on purpose.
      '@typescript-eslint/unbound-method': 'off',
      // A `let` assigned once, after closures that read it were made (metrics proxies), stays `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Fire-and-forget promises must be marked with `void` (no-floating-promises stays on).
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
    },
  },
  {
    // Plain JS (scripts, bins): no type information.
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: {
        module: 'readonly',
        require: 'readonly',
        process: 'readonly',
        fetch: 'readonly',
        AbortSignal: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
      },
    },
  },
  {
    // The deployment checks and the operator walk Kubernetes, compose and Helm objects of
    // any shape, straight from YAML.
    files: ['deploy/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Libraries and services log through pino; only the CLI, tests, bench and scripts print.
    files: [
      'core/src/**/*.ts',
      'discovery/src/**/*.ts',
      'tensor-client/src/**/*.ts',
      'media/src/**/*.ts',
      'model-layout/src/**/*.ts',
      'adapters/src/**/*.ts',
      'stage-host/src/**/*.ts',
      'client/src/**/*.ts',
      'scheduler/src/**/*.ts',
      'tensor-svc/src/**/*.ts',
      'gateway/src/**/*.ts',
      '*-svc/src/**/*.ts',
    ],
    ignores: ['**/*.test.ts'],
    rules: { 'no-console': 'error' },
  },
);
