-- Stores one breaker if nobody changed it since it was loaded (compare-and-set on its
-- version), indexes its key and appends its transitions to the events stream, all at once.
-- On a conflict nothing is written and the current state comes back, as breaker_load.lua
-- returns it, so the caller retries without another round trip.
-- KEYS[1]: the breaker's hash; KEYS[2]: the set of breaker keys; KEYS[3]: the events stream.
-- ARGV[1]: the version loaded; ARGV[2]: the new state (JSON); ARGV[3]: the key;
-- ARGV[4]: the events stream's approximate length cap; ARGV[5]: the unusable state it
-- replaces ('' when none); ARGV[6..]: one events line per transition.
local cur = redis.call('HGET', KEYS[1], 'version') or '0'
if cur ~= ARGV[1] then
  local v = redis.call('HMGET', KEYS[1], 'state', 'version')
  local t = redis.call('TIME')
  return {0, v[1] or false, v[2] or '0', t[1], t[2]}
end
local version = tonumber(cur) + 1
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'version', version)
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'unusable', ARGV[5])
end
redis.call('SADD', KEYS[2], ARGV[3])
for i = 6, #ARGV do
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'line', ARGV[i])
end
return {1, tostring(version)}
