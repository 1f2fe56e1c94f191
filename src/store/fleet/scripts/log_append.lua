-- Appends one line to the error log stream and applies its counter changes, at once.
-- The counters are hashes of integers: a change brings a field up or down, and a field that
-- reaches zero is removed (never below zero). Which fields change is decided by the caller
-- (the thresholds' rules live in one place, in Rust); this only applies them atomically.
--
-- KEYS[1]: the stream; KEYS[2]: the nonce's key (dedupe); KEYS[3]: the id sequence;
-- KEYS[4]: the sessions hash; KEYS[5]: the scope's units hash; KEYS[6]: the scope's
-- "since" hash (the stream id where a unit's open failures begin).
-- ARGV[1]: the stream's approximate length cap (0: none); ARGV[2]: the nonce's TTL (s; 0:
-- kept for good, as `store migrate` keeps them, so a copy run again adds nothing);
-- ARGV[3]: the line before its id; ARGV[4]: the line after its id; ARGV[5]: with ARGV[6]
-- 'seq', the id's prefix: the id is it and the next sequence number, and goes between
-- ARGV[3] and ARGV[4]; with 'keep', the id the line already holds (ARGV[3] .. ARGV[4]);
-- ARGV[7]: the session ('' for none); ARGV[8]: the number of changes; then per change:
-- the hash ('s' sessions, 'u' units), the field, the delta, and '1' when the stream id is
-- remembered as where the unit's open failures begin (when its count becomes 1).
-- Returns {added, error id, stream id, the session's count, the scope's units (HGETALL)}.
local seen = redis.call('GET', KEYS[2])
if seen then
  local prev = cjson.decode(seen)
  return {0, prev[1], prev[2], 0, {}}
end
local id = ARGV[5]
local line = ARGV[3] .. ARGV[4]
if ARGV[6] == 'seq' then
  id = id .. string.format('%06d', redis.call('INCR', KEYS[3]))
  line = ARGV[3] .. id .. ARGV[4]
end
local sid
if tonumber(ARGV[1]) > 0 then
  sid = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'line', line)
else
  sid = redis.call('XADD', KEYS[1], '*', 'line', line)
end
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[2], cjson.encode({id, sid}), 'EX', ARGV[2])
else
  redis.call('SET', KEYS[2], cjson.encode({id, sid}))
end
local n = tonumber(ARGV[8])
for i = 0, n - 1 do
  local at = 9 + i * 4
  local key = KEYS[4]
  if ARGV[at] == 'u' then key = KEYS[5] end
  local field = ARGV[at + 1]
  local count = redis.call('HINCRBY', key, field, ARGV[at + 2])
  if count <= 0 then
    redis.call('HDEL', key, field)
    if ARGV[at + 3] == '1' then redis.call('HDEL', KEYS[6], field) end
  elseif count == 1 and ARGV[at + 3] == '1' and tonumber(ARGV[at + 2]) > 0 then
    redis.call('HSET', KEYS[6], field, sid)
  end
end
local session = 0
if ARGV[7] ~= '' then
  session = tonumber(redis.call('HGET', KEYS[4], ARGV[7]) or '0')
end
return {1, id, sid, session, redis.call('HGETALL', KEYS[5])}
