import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeValue } from '../../src/options/redact.js';
import { redactText, redactUrl } from '../../src/util/redact-text.js';

describe('redactUrl', () => {
  it('hides the whole password when it holds @ (URL parsers split at the last @)', () => {
    const url = 'redis://app:p@ss@w0rd-tail@redis.internal:6379/0';
    assert.equal(redactUrl(url), 'redis://app:[redacted]@redis.internal:6379/0');
    assert.equal(new URL(url).password, 'p%40ss%40w0rd-tail');
    assert.doesNotMatch(describeValue(url, ['repository', 'url']), /w0rd|tail|ss/);
  });

  it('keeps a URL without credentials as it is', () => {
    assert.equal(redactUrl('redis://redis.internal:6379'), 'redis://redis.internal:6379');
  });
});

describe('redactText', () => {
  it('hides URL passwords, password= settings and bearer tokens inside running text', () => {
    const text =
      'connect failed: postgres://app:s3cr@t@db.internal:5432/app (password=hunter22; api_key: abcd1234) ' +
      'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig';
    const safe = redactText(text);
    for (const secret of ['s3cr', 't@db', 'hunter22', 'abcd1234', 'eyJhbGci']) {
      assert.ok(!safe.includes(secret), `${secret} leaked: ${safe}`);
    }
    assert.match(safe, /postgres:\/\/app:\[redacted\]@db\.internal:5432\/app/);
    assert.match(safe, /password=\[redacted\]/);
  });

  it("keeps mysql's (using password: YES) and (using password: NO), and still hides a password after using", () => {
    for (const used of ['YES', 'NO']) {
      const text = `Access denied for user 'idem'@'127.0.0.1' (using password: ${used})`;
      assert.equal(redactText(text), text);
    }
    assert.equal(redactText('(using password: hunter22)'), '(using password: [redacted]');
    assert.equal(redactText('password: YES) and more'), 'password: [redacted] and more');
  });
});
