import type { ChainableCommander, Cluster, Redis } from 'ioredis';

/*
 * Lua scripts behind the Redis repository. Each runs atomically on the server, so a check and the write that
 * depends on it can never interleave with another client's. Records use the text form of `encodeRecord`:
 * `state \1 expiresAt \1 leaseExpiresAt \1 owner \1 eventTime \1 fingerprint`. Times come from the client's
 * clock (ARGV), never from the server's, so liveness is decided exactly as every other store decides it.
 */

/**
 * Claim: for each key, write the new record unless a live one is there, and return the live one if so.
 * `SET NX PX` alone is not enough: a record past its exact expiry may still be present until Redis collects it
 * (or a lapsed lease may hold it), and it must be replaced atomically, not reported as a duplicate. So the
 * common case (a new id) is one `SET NX PX`; only when a record exists is it read and judged by the client's
 * `now`, and overwritten when no longer live.
 *
 * KEYS: record keys. ARGV[1]: now, ARGV[2]: PX for every new record, ARGV[3]: the record text shared by all
 * keys, or, when ARGV has one text per key, ARGV[2 + i] for KEYS[i].
 * Returns one entry per key: false (nil) when written, else the live record's text.
 */
export const CLAIM_LUA = String.raw`
local now = tonumber(ARGV[1])
local px = ARGV[2]
local shared = #ARGV == 3
local out = {}
for i, key in ipairs(KEYS) do
  local value = shared and ARGV[3] or ARGV[2 + i]
  out[i] = false
  if not redis.call('SET', key, value, 'NX', 'PX', px) then
    local old = redis.call('GET', key)
    local live = false
    if old then
      local state, expires, lease = string.match(old, '^([^\1]*)\1([^\1]*)\1([^\1]*)')
      live = (tonumber(state == 'f' and lease or expires) or 0) > now
    end
    if live then
      out[i] = old
    else
      redis.call('SET', key, value, 'PX', px)
    end
  end
end
return out
`;

/**
 * Confirm: turn each key's in-flight record into a confirmed one, only if it is still held by the given owner.
 * Event time and fingerprint are kept.
 *
 * KEYS: record keys. ARGV[1]: the new expiresAt, ARGV[2]: its PX, ARGV[2 + i]: the owner for KEYS[i].
 * Returns 1 per confirmed key, 0 otherwise.
 */
export const CONFIRM_LUA = String.raw`
local out = {}
for i, key in ipairs(KEYS) do
  local old = redis.call('GET', key)
  out[i] = 0
  if old then
    local state, owner, rest = string.match(old, '^([^\1]*)\1[^\1]*\1[^\1]*\1([^\1]*)\1(.*)$')
    if state == 'f' and owner == ARGV[2 + i] then
      redis.call('SET', key, 'c\1' .. ARGV[1] .. '\1\1\1' .. rest, 'PX', ARGV[2])
      out[i] = 1
    end
  end
end
return out
`;

/**
 * Release: delete the key only while it is the given owner's in-flight claim.
 * KEYS[1]: record key. ARGV[1]: owner. Returns 1 when deleted.
 */
export const RELEASE_LUA = String.raw`
local old = redis.call('GET', KEYS[1])
if not old then return 0 end
local state, owner = string.match(old, '^([^\1]*)\1[^\1]*\1[^\1]*\1([^\1]*)')
if state == 'f' and owner == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/** A script argument; arrays are flattened by ioredis. */
type Arg = string | number | readonly (string | number)[];

/** The script commands once defined on a client (ioredis sends EVALSHA, falling back to EVAL once per socket). */
export interface ScriptCommands<R> {
  /** `numKeys, keys, now, px, text | texts` → per key: null (claimed) or the live record's text. */
  idemClaim(numKeys: number, ...args: Arg[]): R;
  /** `numKeys, keys, expiresAt, px, owners` → per key: 1 (confirmed) or 0. */
  idemConfirm(numKeys: number, ...args: Arg[]): R;
  /** Single-key claim: `key, now, px, text` → `[null]` (claimed) or `[live record's text]`. */
  idemClaimOne(key: string, now: number, px: number, text: string): R;
  /** Single-key confirm: `key, expiresAt, px, owner` → `[1]` or `[0]`. */
  idemConfirmOne(key: string, expiresAt: number, px: number, owner: string): R;
  /** `key, owner` → 1 when deleted. */
  idemRelease(key: string, owner: string): R;
}

/** A client with our scripts defined on it. */
export type ScriptedClient = (Redis | Cluster) & ScriptCommands<Promise<unknown>>;
/** A pipeline of a scripted client. */
export type ScriptedPipeline = ChainableCommander & ScriptCommands<ScriptedPipeline>;

/**
 * Defines the scripts on the client. Redefining on a client shared by several repositories is harmless: the
 * script bodies are identical.
 *
 * The `One` variants declare their single key, so the key is their first argument: ioredis' Cluster
 * auto-pipelining picks the node from a command's first argument, and routes them per node.
 */
export function defineScripts(client: Redis | Cluster): ScriptedClient {
  // numberOfKeys is left out: these take a variable number of keys, passed first.
  client.defineCommand('idemClaim', { lua: CLAIM_LUA });
  client.defineCommand('idemConfirm', { lua: CONFIRM_LUA });
  client.defineCommand('idemClaimOne', { lua: CLAIM_LUA, numberOfKeys: 1 });
  client.defineCommand('idemConfirmOne', { lua: CONFIRM_LUA, numberOfKeys: 1 });
  client.defineCommand('idemRelease', { lua: RELEASE_LUA, numberOfKeys: 1 });
  return client as ScriptedClient;
}
