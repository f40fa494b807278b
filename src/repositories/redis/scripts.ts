import type { Cluster, Redis } from 'ioredis';

/*
 * Lua scripts behind the Redis repository (docs/redis.md). Records are `encodeRecord`'s text (older records end
 * after the fingerprint or the result). Time is the `now` given, or with '' the server's `TIME`: one clock for
 * every worker. Claims and confirms answer `{ now, i, x, j, y... }`, only the keys that did not go the common way,
 * so a batch of new ids answers one number; reads answer `{ now, one reply per key... }`.
 */

/** Shared by every script: the time to judge by (ARGV value, or the server's TIME when '') and number output. */
const PRELUDE = `
local function clock(given)
  if given ~= '' then return tonumber(given) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- %.17g writes every double exactly (and integers as plain digits), so JS reads back the number it computes.
local function num(x) return string.format('%.17g', x) end
local call = redis.call
`;

/**
 * Claim: for each key, write the new record unless a live one is there (a record past its end may stay until Redis
 * collects it), and return the live one if so. A new id costs one `SET NX PX GET` on Redis 7 (a status reply would
 * cost a table per key); Redis 6 sends `SET NX PX`, then `GET`.
 * KEYS: record keys. ARGV[1]: now or '' (server time), ARGV[2]: PX for every new record, ARGV[3]: ttlMs,
 * ARGV[4]: leaseMs, or '' for a record written confirmed, ARGV[5]: the encoded owner ('' for none),
 * ARGV[6]: the record's tail (`eventTime \1 fingerprint \1 result`, see `encodeEntryTail`) shared by all keys, or,
 * when ARGV has one tail per key, ARGV[5 + i] for KEYS[i]. The script appends `now` as the first-seen time.
 * Answers `{ now, i, live record text, ... }` for each KEYS[i] that holds a live record; every other key was
 * written.
 */
export const CLAIM_LUA = `${PRELUDE}${String.raw`
local now = clock(ARGV[1])
local px = ARGV[2]
local expires = num(now + tonumber(ARGV[3]))
local head
if ARGV[4] == '' then
  head = 'c\1' .. expires .. '\1\1' .. ARGV[5] .. '\1'
else
  head = 'f\1' .. expires .. '\1' .. num(now + tonumber(ARGV[4])) .. '\1' .. ARGV[5] .. '\1'
end
local seen = '\1' .. num(now)
-- One record text for every key when they share a tail: no string is built per key on the common path.
local shared = #ARGV == 6 and (head .. ARGV[6] .. seen)
local nxget = redis.REDIS_VERSION_NUM ~= nil
local out = { now }
local n = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local value = shared or (head .. ARGV[5 + i] .. seen)
  local old
  if nxget then
    old = call('SET', key, value, 'NX', 'PX', px, 'GET')
  elseif not call('SET', key, value, 'NX', 'PX', px) then
    old = call('GET', key)
  end
  if old then
    local state, until_expiry, until_lease = string.match(old, '^([^\1]*)\1([^\1]*)\1([^\1]*)')
    if (tonumber(state == 'f' and until_lease or until_expiry) or 0) > now then
      out[n + 1] = i
      out[n + 2] = old
      n = n + 2
    else
      call('SET', key, value, 'PX', px)
    end
  end
end
return out
`}`;

/**
 * Confirm: turn each key's in-flight record into a confirmed one while the given owner holds it, lapsed or not (a
 * takeover rewrites the owner). Event time, fingerprint and first-seen time are kept.
 * KEYS: record keys. ARGV[1]: now or '' (server time), ARGV[2]: ttlMs, ARGV[3]: PX, ARGV[3 + i]: the encoded
 * owner for KEYS[i], ARGV[3 + #KEYS + i]: the encoded result for KEYS[i], or '' for none (a claim holds none: it
 * goes between the fingerprint and the first-seen time; a claim of an older version has neither).
 * Answers `{ now, i, 0, ... }` for each KEYS[i] not confirmed; every other key was confirmed.
 */
const CONFIRM_LUA = `${PRELUDE}${String.raw`
local now = clock(ARGV[1])
local expires = num(now + tonumber(ARGV[2]))
local px = ARGV[3]
local n = #KEYS
local out = { now }
for i = 1, n do
  local key = KEYS[i]
  local old = call('GET', key)
  local done = false
  if old then
    local state, owner, kept, rest =
      string.match(old, '^([^\1]*)\1[^\1]*\1[^\1]*\1([^\1]*)\1([^\1]*\1[^\1]*)(.*)$')
    if state == 'f' and owner == ARGV[3 + i] then
      local result = ARGV[3 + n + i] or ''
      local seen = string.match(rest, '^\1[^\1]*\1([^\1]+)$')
      if seen then
        kept = kept .. '\1' .. result .. '\1' .. seen
      elseif result ~= '' then
        kept = kept .. '\1' .. result
      end
      call('SET', key, 'c\1' .. expires .. '\1\1\1' .. kept, 'PX', px)
      done = true
    end
  end
  if not done then
    out[#out + 1] = i
    out[#out + 1] = 0
  end
end
return out
`}`;

/** Read: the records of the keys (text or false), with the server's time, the clock claims use. */
const READ_LUA = `${PRELUDE}
local out = redis.call('MGET', unpack(KEYS))
table.insert(out, 1, clock(''))
return out
`;

/** Release: delete the key only while it is the given owner's (ARGV[1]) in-flight claim; 1 when deleted. */
const RELEASE_LUA = String.raw`
local old = redis.call('GET', KEYS[1])
if not old then return 0 end
local state, owner = string.match(old, '^([^\1]*)\1[^\1]*\1[^\1]*\1([^\1]*)')
if state == 'f' and owner == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * Renew: extend the key's in-flight claim to now + leaseMs while the given owner holds it (the rest stays); PX is
 * raised when the new lease would outlive it. ARGV[1]: now or '' (server time), ARGV[2]: leaseMs, ARGV[3]: owner.
 * Returns 1 when renewed.
 */
const RENEW_LUA = `${PRELUDE}${String.raw`
local now = clock(ARGV[1])
local old = call('GET', KEYS[1])
if not old then return 0 end
local state, expiry, owner, rest = string.match(old, '^([^\1]*)\1([^\1]*)\1[^\1]*\1([^\1]*)\1(.*)$')
if state ~= 'f' or owner ~= ARGV[3] then return 0 end
local lease = tonumber(ARGV[2])
local px = math.max(call('PTTL', KEYS[1]), math.ceil(lease), 1)
call('SET', KEYS[1], 'f\1' .. expiry .. '\1' .. num(now + lease) .. '\1' .. owner .. '\1' .. rest, 'PX', px)
return 1
`}`;

/** Commands taking `numKeys, keys...` first, each with a `<name>One` form. */
const MULTI_KEY = { idemClaim: CLAIM_LUA, idemConfirm: CONFIRM_LUA, idemRead: READ_LUA };
/**
 * Commands of one declared key, passed first: ioredis' Cluster auto-pipelining routes a command by its first
 * argument, so these go one pipeline per node.
 */
const ONE_KEY = { idemRelease: RELEASE_LUA, idemRenew: RENEW_LUA };

/** A client with the scripts defined (ioredis sends EVALSHA, falling back to EVAL); arrays are flattened. */
export type ScriptedClient = (Redis | Cluster) &
  Record<
    keyof typeof MULTI_KEY | `${keyof typeof MULTI_KEY}One` | keyof typeof ONE_KEY,
    (...args: (string | number | readonly (string | number)[])[]) => Promise<unknown>
  >;

/** Harmless on a client shared by several repositories (same bodies). */
export function defineScripts(client: Redis | Cluster): ScriptedClient {
  for (const [name, lua] of Object.entries(MULTI_KEY)) {
    client.defineCommand(name, { lua });
    client.defineCommand(`${name}One`, { lua, numberOfKeys: 1 });
  }
  for (const [name, lua] of Object.entries(ONE_KEY)) client.defineCommand(name, { lua, numberOfKeys: 1 });
  return client as ScriptedClient;
}
