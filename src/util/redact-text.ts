// Texts that leave the process (stored failures, config errors, logs) may quote a connection string or a header
// that holds a credential. These rules find the common shapes; they are a net, not a guarantee.

/** Shown in place of a secret. */
export const REDACTED = '[redacted]';

// `scheme://user:password@host`: URL parsers split the authority at its LAST `@`, so the password runs up to
// the last `@` of the value (a password may hold `@`, `#`, `/` or `?` when the URL is malformed).
const URL_CREDENTIALS = /^([a-z][a-z0-9+.-]*:\/\/)([^:@/]*):([\s\S]*)@/i;

/** Replaces the password inside a URL (`redis://user:p@ss@host` → `redis://user:[redacted]@host`). */
export function redactUrl(text: string): string {
  return text.replace(URL_CREDENTIALS, (_, scheme: string, user: string) => `${scheme}${user}:${REDACTED}@`);
}

// The same inside running text: the URL ends at white space, its password at the token's last `@`.
const URL_IN_TEXT = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s:@/]*):(\S*)@/gi;
// `password=…`, `pwd: …`, `api_key=…` in connection strings and driver messages. MySQL's "Access denied …
// (using password: YES)" says only whether one was sent, and is kept: it tells a wrong password from a missing one.
const KEY_VALUE =
  /\b(?!(?<=\(using )password: (?:YES|NO)\))(password|passwd|pwd|passphrase|secret|client[_-]?secret|token|access[_-]?token|api[_-]?key|access[_-]?key|secret[_-]?access[_-]?key|session[_-]?token)(\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s;,&]+)/gi;
// `Authorization: Bearer …`, `Basic …`.
const AUTH_SCHEME = /\b(bearer|basic|digest)\s+[A-Za-z0-9._~+/=-]{8,}/gi;

/**
 * A copy of a free text (an error message) with credentials it quotes replaced: URL user-info passwords,
 * `password=`/`token=`-style settings, and bearer/basic credentials.
 */
export function redactText(text: string): string {
  return text
    .replace(URL_IN_TEXT, (_, scheme: string, user: string) => `${scheme}${user}:${REDACTED}@`)
    .replace(KEY_VALUE, (_, key: string, separator: string) => `${key}${separator}${REDACTED}`)
    .replace(AUTH_SCHEME, (_, scheme: string) => `${scheme} ${REDACTED}`);
}
