// `node --import tsx --import ./test/helpers/hide-packages/register.mjs ...` with
// IDEM_TEST_HIDE_PACKAGES=kafkajs,ioredis: those npm packages cannot be resolved in this process, as if they were
// not installed (Node's own error code and wording), so a test sees what a user without them sees.
import { register } from 'node:module';

const packages = (process.env.IDEM_TEST_HIDE_PACKAGES ?? '')
  .split(',')
  .map((name) => name.trim())
  .filter(Boolean);
register('./hooks.mjs', import.meta.url, { data: { packages } });
