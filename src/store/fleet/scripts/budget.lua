-- One call on a key's retry budget (gRPC's retryThrottling, in thousandths of a token): a
-- failure costs 1000, a success gives back the ratio, never below 0 nor above the maximum.
-- A budget never used is full; a stored count that is not a number is spent (corrupting a
-- budget never refills it), and one out of range is clamped to it.
-- KEYS[1]: the budget's hash; KEYS[2]: the set of budget keys; KEYS[3]: the record's nonce.
-- ARGV: op (check, failure, success), max (thousandths), ratio (thousandths), the key, the
-- record's nonce ('' for none), how long a nonce is remembered (s). A record whose nonce was
-- seen (pushed again after its answer was lost) changes nothing.
-- Returns {tokens after, 1 when the record was applied (0 for a check or a nonce seen)}.
local max, ratio = tonumber(ARGV[2]), tonumber(ARGV[3])
local raw = redis.call('HGET', KEYS[1], 'milli')
local t
if raw then
  t = tonumber(raw) or 0
  if t ~= t then t = 0 end
  t = math.floor(t)
else
  t = max
end
if t > max then t = max end
if t < 0 then t = 0 end
if ARGV[1] == 'check' then
  return {t, 0}
end
if ARGV[5] ~= '' then
  if not redis.call('SET', KEYS[3], '1', 'NX', 'EX', ARGV[6]) then
    return {t, 0}
  end
end
if ARGV[1] == 'failure' then
  t = math.max(0, t - 1000)
elseif ARGV[1] == 'success' then
  t = math.min(max, t + ratio)
end
redis.call('HSET', KEYS[1], 'milli', t)
redis.call('SADD', KEYS[2], ARGV[4])
return {t, 1}
