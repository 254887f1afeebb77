#pragma once

// The Lua scripts of the Redis store (redis_store.h), each atomic in Redis and sent by
// EVALSHA (RedisClient::Eval). KEYS[1] is a sequence's hash: `epoch` (decimal), `rec`
// (state_record.h) and, while a replica keeps the sequence's newest states in memory only
// (--sequence-durability=drain), `holder` (that replica's id). Every script gives the same
// outcome, or a refusal, when run twice (a reply lost with its connection is sent again).

namespace rnnserve::server::store::scripts {

// Start: creates the sequence at epoch ARGV[1] with record ARGV[2], TTL ARGV[3] ms and holder
// ARGV[4] ('' none) unless it exists; 1, or the existing record. Run twice, the second finds
// its own record: 1.
inline constexpr char kCreate[] = R"(
local r = redis.call('HGET', KEYS[1], 'rec')
if r == ARGV[2] then return 1 end
if r then return r end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'rec', ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'holder', ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1)";

// Continue on replica ARGV[2]: 0 when it is not live; {holder, epoch, record} when another
// replica holds it; else (taking the hold when ARGV[3] is '1') 1 when its epoch is ARGV[1]
// (the local copy is current), or its record.
inline constexpr char kFetch[] = R"(
local v = redis.call('HMGET', KEYS[1], 'epoch', 'holder')
if not v[1] then return 0 end
if v[2] and v[2] ~= ARGV[2] then return {v[2], v[1], redis.call('HGET', KEYS[1], 'rec')} end
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'holder', ARGV[2]) end
if v[1] == ARGV[1] then return 1 end
return redis.call('HGET', KEYS[1], 'rec'))";

// Store: when its epoch is still ARGV[1] and its holder ARGV[5] ('' none), the record ARGV[3]
// at epoch ARGV[2], no holder, TTL ARGV[4] ms; 1 stored (or stored already: run twice), 0
// another chunk stored first (or another replica holds it), -1 not live.
inline constexpr char kStore[] = R"(
local v = redis.call('HMGET', KEYS[1], 'epoch', 'holder')
local e, h = v[1], v[2] or ''
if not e then return -1 end
if e == ARGV[2] and h == '' and redis.call('HGET', KEYS[1], 'rec') == ARGV[3] then return 1 end
if e ~= ARGV[1] or h ~= ARGV[5] then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[2], 'rec', ARGV[3])
if h ~= '' then redis.call('HDEL', KEYS[1], 'holder') end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1)";

// End (or lost): deletes it when its epoch is still ARGV[1] and its holder ARGV[2] ('' none).
inline constexpr char kErase[] = R"(
local v = redis.call('HMGET', KEYS[1], 'epoch', 'holder')
if v[1] == ARGV[1] and (v[2] or '') == ARGV[2] then return redis.call('DEL', KEYS[1]) end
return 0)";

// A held sequence's TTL: ARGV[2] ms more when replica ARGV[1] still holds it; 1, else 0.
inline constexpr char kTouch[] = R"(
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0)";

// Gives a hold back (a continue that failed after taking it): 1, or 0 when not held by ARGV[1].
inline constexpr char kUnhold[] = R"(
if redis.call('HGET', KEYS[1], 'holder') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'holder')
end
return 0)";

// Asks a holder to hand a sequence over: ARGV[1] (a sequence's key) joins the set KEYS[1],
// which lives ARGV[2] ms.
inline constexpr char kAskHandOver[] = R"(
redis.call('SADD', KEYS[1], ARGV[1])
return redis.call('PEXPIRE', KEYS[1], ARGV[2]))";

// The sequences a holder is asked to hand over: the set KEYS[1]'s members, the set deleted.
inline constexpr char kTakeHandOvers[] = R"(
local v = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
return v)";

}  // namespace rnnserve::server::store::scripts
