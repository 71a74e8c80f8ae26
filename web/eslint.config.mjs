// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
// ESLint's settings for the console's script, web/console.js: eslint's recommended rules
// for a plain ES2017 browser script (no modules). scripts/test.sh runs it (`npm ci` here,
// then `npm run lint`). The globals are the browser's names the script uses.
import js from '@eslint/js';

export default [
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: {
      ecmaVersion: 2017,
      sourceType: 'script',
      globals: {
        window: 'readonly',
        document: 'readonly',
        fetch: 'readonly',
        sessionStorage: 'readonly',
        performance: 'readonly',
        localStorage: 'readonly',
        location: 'readonly',
        history: 'readonly',
        navigator: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        URLSearchParams: 'readonly',
        URL: 'readonly',
        Blob: 'readonly',
        console: 'readonly',
      },
    },
    rules: {
      'no-unused-vars': ['error', { args: 'after-used', caughtErrors: 'none' }],
      eqeqeq: ['error', 'always'],
      'no-implicit-globals': 'error',
      'no-undef': 'error',
    },
  },
];
